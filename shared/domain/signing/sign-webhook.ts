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
}

export type WebhookHeaders = Record<string, string>;

export function signWebhook(input: SignWebhookInput): WebhookHeaders {
  const { scheme, secret, id } = input;
  const names = SIGNATURE_HEADERS[scheme];
  let timestamp: string | undefined;
  if (names.timestamp !== undefined) {
    timestamp = String(input.timestamp ?? Math.floor(Date.now() / 1000));
    if (!/^\d+$/.test(timestamp)) throw new TypeError('timestamp must be a non-negative integer of unix seconds');
  }
  const body = typeof input.body === 'string' ? Buffer.from(input.body, 'utf8') : input.body;
  const mac = createHmac('sha256', signingKey(scheme, secret))
    .update(signedContent(scheme, id, timestamp, body))
    .digest();
  return {
    'content-type': 'application/json',
    [names.id]: id,
    ...(names.timestamp !== undefined && timestamp !== undefined ? { [names.timestamp]: timestamp } : {}),
    [names.signature]: formatSignature(scheme, mac),
  };
}
