export const SIGNATURE_SCHEMES = ['hmac-sha256', 'standard-webhooks'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

export interface SignatureHeaderNames {
  id: string;
  timestamp: string;
  signature: string;
}

/** Lower-case, as node:http presents incoming header names. */
export const SIGNATURE_HEADERS: Readonly<Record<SignatureScheme, SignatureHeaderNames>> = {
  'hmac-sha256': { id: 'x-webhook-id', timestamp: 'x-webhook-timestamp', signature: 'x-webhook-signature' },
  'standard-webhooks': { id: 'webhook-id', timestamp: 'webhook-timestamp', signature: 'webhook-signature' },
};

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

export function signingKey(scheme: SignatureScheme, secret: string): Buffer {
  if (scheme === 'standard-webhooks') return decodeStandardSecret(secret);
  if (secret.length === 0) throw new TypeError('hmac-sha256 secret must not be empty');
  return Buffer.from(secret, 'utf8');
}

/** hmac-sha256 signs `timestamp.body`; Standard Webhooks signs `id.timestamp.body`. */
export function signedContent(scheme: SignatureScheme, id: string, timestamp: string, body: Uint8Array): Buffer {
  const prefix = scheme === 'standard-webhooks' ? `${id}.${timestamp}.` : `${timestamp}.`;
  return Buffer.concat([Buffer.from(prefix, 'utf8'), body]);
}
