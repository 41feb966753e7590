import { createHmac } from 'node:crypto';
import { formatSignature, SIGNATURE_HEADERS, signedContent, signingKey } from './schemes.ts';
import type { SignatureScheme } from './schemes.ts';

export interface SignWebhookInput {
  scheme: SignatureScheme;
  secret: string;
  /** Send exactly these bytes: the signature covers the raw body, not its JSON meaning. */
  body: string | Uint8Array;
  id: string;
  /** Unix seconds; defaults to now. Ignored by a scheme without a timestamp header (hmac-sha256-body). */
  timestamp?: number;
  /**
   * hmac-sha256 only: send the timestamp as unix seconds (default) or as an ISO-8601 UTC time
   * (`2026-01-01T00:00:00Z`), signed as sent.
   */
  timestampFormat?: 'unix' | 'iso';
  /** hmac-sha256 only: `v1=<hex>` (default) or the bare hex of seed 004's sample. */
  signatureFormat?: 'v1' | 'bare';
}

export type WebhookHeaders = Record<string, string>;

export function signWebhook(input: SignWebhookInput): WebhookHeaders {
  const { scheme, secret, id } = input;
  const names = SIGNATURE_HEADERS[scheme];
  const timestampFormat = input.timestampFormat ?? 'unix';
  const signatureFormat = input.signatureFormat ?? 'v1';
  if (scheme !== 'hmac-sha256' && (timestampFormat !== 'unix' || signatureFormat !== 'v1'))
    throw new TypeError(`${scheme} has one timestamp and signature form; ISO timestamps and bare signatures are hmac-sha256's`);
  let timestamp: string | undefined;
  if (names.timestamp !== undefined) {
    const seconds = input.timestamp ?? Math.floor(Date.now() / 1000);
    if (!Number.isSafeInteger(seconds) || seconds < 0) throw new TypeError('timestamp must be a non-negative integer of unix seconds');
    timestamp = timestampFormat === 'iso' ? new Date(seconds * 1000).toISOString().replace('.000Z', 'Z') : String(seconds);
  }
  const body = typeof input.body === 'string' ? Buffer.from(input.body, 'utf8') : input.body;
  const mac = createHmac('sha256', signingKey(scheme, secret))
    .update(signedContent(scheme, id, timestamp, body))
    .digest();
  return {
    'content-type': 'application/json',
    [names.id]: id,
    ...(names.timestamp !== undefined && timestamp !== undefined ? { [names.timestamp]: timestamp } : {}),
    [names.signature]: signatureFormat === 'bare' ? Buffer.from(mac).toString('hex') : formatSignature(scheme, mac),
  };
}
