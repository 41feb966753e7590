import { z } from 'zod';
export const SIGNATURE_SCHEMES = ['hmac-sha256', 'standard-webhooks', 'hmac-sha256-body'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

export interface SignatureHeaderNames {
  id: string;
  /** Absent for a scheme that signs no timestamp (hmac-sha256-body): it has no replay window. */
  timestamp?: string;
  signature: string;
}

/** Lower-case, as node:http presents incoming header names. */
export const SIGNATURE_HEADERS: Readonly<Record<SignatureScheme, SignatureHeaderNames>> = {
  'hmac-sha256': { id: 'x-webhook-id', timestamp: 'x-webhook-timestamp', signature: 'x-webhook-signature' },
  'standard-webhooks': { id: 'webhook-id', timestamp: 'webhook-timestamp', signature: 'webhook-signature' },
  'hmac-sha256-body': { id: 'x-webhook-id', signature: 'x-webhook-signature' },
};

/**
 * How one MAC is written in the signature header: `<tag><separator><mac in encoding>`, several
 * entries separated by spaces. hmac-sha256 `v1=<hex>`, standard-webhooks `v1,<base64>`,
 * hmac-sha256-body `sha256=<hex>` (GitHub-style).
 */
export interface SignatureFormat {
  tag: string;
  separator: '=' | ',';
  encoding: 'hex' | 'base64';
  /**
   * An entry may also be the bare hex MAC, untagged (seed 004's sample sends that): unambiguous,
   * since a tagged entry always holds its separator and a bare one is exactly 64 hex digits.
   */
  bareHex?: true;
}

export const SIGNATURE_FORMATS: Readonly<Record<SignatureScheme, SignatureFormat>> = {
  'hmac-sha256': { tag: 'v1', separator: '=', encoding: 'hex', bareHex: true },
  'standard-webhooks': { tag: 'v1', separator: ',', encoding: 'base64' },
  'hmac-sha256-body': { tag: 'sha256', separator: '=', encoding: 'hex' },
};

/** One signature header entry for an HMAC-SHA256 over signedContent. */
export function formatSignature(scheme: SignatureScheme, mac: Uint8Array): string {
  const { tag, separator, encoding } = SIGNATURE_FORMATS[scheme];
  return `${tag}${separator}${Buffer.from(mac).toString(encoding)}`;
}

/**
 * The forms a scheme's timestamp header may take: unix seconds always; hmac-sha256 also an
 * ISO-8601 time with `Z` or an offset (seed 004: "UNIX epoch or a signed ISO timestamp").
 * Standard Webhooks stays with unix seconds, as its spec and reference libraries do.
 */
export const TIMESTAMP_FORMS: Readonly<Record<SignatureScheme, readonly ('unix' | 'iso')[]>> = {
  'hmac-sha256': ['unix', 'iso'],
  'standard-webhooks': ['unix'],
  'hmac-sha256-body': [],
};

const UNIX_SECONDS = /^\d{1,15}$/;
// Calendar-checked (no 30 February), seconds required, Z or ±HH:MM: the envelope's occurred_at rule.
const ISO_TIMESTAMP = z.iso.datetime({ offset: true });

/**
 * The instant a timestamp header names, in unix seconds (an ISO time may carry a fraction), or
 * undefined when it is in none of the scheme's forms. The signature still covers the header's
 * string exactly as sent, never this number.
 */
export function parseSignedTimestamp(scheme: SignatureScheme, value: string): number | undefined {
  const forms = TIMESTAMP_FORMS[scheme];
  if (forms.includes('unix') && UNIX_SECONDS.test(value)) return Number(value);
  if (forms.includes('iso') && value.length <= 40 && ISO_TIMESTAMP.safeParse(value).success) {
    const ms = Date.parse(value);
    if (Number.isNaN(ms)) return undefined;
    // Date.parse keeps milliseconds; the digits after them matter to no window.
    const fraction = /\.(\d+)/.exec(value)?.[1];
    const subMs = fraction !== undefined && fraction.length > 3 ? Number(`0.${fraction.slice(3)}`) / 1000 : 0;
    return ms / 1000 + subMs;
  }
  return undefined;
}

const STANDARD_SECRET_PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Standard Webhooks secrets are base64 key bytes, with or without the `whsec_` prefix. */
export function decodeStandardSecret(secret: string): Buffer {
  const encoded = secret.startsWith(STANDARD_SECRET_PREFIX) ? secret.slice(STANDARD_SECRET_PREFIX.length) : secret;
  if (encoded.length === 0 || !BASE64.test(encoded)) {
    throw new TypeError('standard-webhooks secret must be base64, optionally prefixed with whsec_');
  }
  return Buffer.from(encoded, 'base64');
}

/** standard-webhooks: the decoded base64 secret; hmac-sha256 and hmac-sha256-body: the UTF-8 secret. */
export function signingKey(scheme: SignatureScheme, secret: string): Buffer {
  if (scheme === 'standard-webhooks') return decodeStandardSecret(secret);
  if (secret.length === 0) throw new TypeError(`${scheme} secret must not be empty`);
  return Buffer.from(secret, 'utf8');
}

/**
 * What goes before the body in the signed content: `timestamp.` for hmac-sha256,
 * `id.timestamp.` for Standard Webhooks, nothing for hmac-sha256-body (the body alone).
 * The timestamp is the header's string exactly as sent.
 */
export function signedPrefix(scheme: SignatureScheme, id: string, timestamp: string | undefined): string {
  if (scheme === 'hmac-sha256-body') return '';
  if (timestamp === undefined) throw new TypeError(`${scheme} signs a timestamp; none was given`);
  return scheme === 'standard-webhooks' ? `${id}.${timestamp}.` : `${timestamp}.`;
}

/** hmac-sha256 signs `timestamp.body`; Standard Webhooks signs `id.timestamp.body`; hmac-sha256-body signs the body. */
export function signedContent(scheme: SignatureScheme, id: string, timestamp: string | undefined, body: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(signedPrefix(scheme, id, timestamp), 'utf8'), body]);
}
