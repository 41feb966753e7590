import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import { parseSignedTimestamp, SIGNATURE_FORMATS, SIGNATURE_HEADERS, signedPrefix, signingKey } from './schemes.ts';
import type { SignatureScheme } from './schemes.ts';

export interface SigningSecret {
  id: string;
  value: string;
  /** During a rotation: when the provider stops signing with it. It verifies until then, never after. */
  retireAfter?: Date;
}

export interface VerifySignatureInput {
  scheme: SignatureScheme;
  /** Every active secret of the source; all are tried so secrets can rotate. */
  secrets: readonly SigningSecret[];
  /**
   * Single header values; the caller rejects repeated headers before this point. `timestamp` is
   * ignored by a scheme without a timestamp header (hmac-sha256-body).
   */
  headers: { id?: string | undefined; timestamp?: string | undefined; signature?: string | undefined };
  rawBody: Uint8Array;
  /** Unix seconds. */
  now: number;
  /** Milliseconds since the epoch, for the secrets' retire times (default `now` in milliseconds). */
  nowMs?: number;
  /** The replay window; unused by a scheme without a timestamp (hmac-sha256-body). */
  toleranceSeconds: number;
}

/** secret_retired: the signature matches only secrets past their retireAfter. */
export type SignatureFailureReason =
  'missing_header' | 'malformed_timestamp' | 'timestamp_out_of_window' | 'malformed_signature' | 'no_matching_signature' | 'secret_retired';

/**
 * `timestamp` and `clockSkewSeconds` are set once the timestamp has been read, and only for a
 * scheme that has one: hmac-sha256-body results never carry them.
 */
export type VerifySignatureResult =
  | { ok: true; secretId: string; timestamp?: number; clockSkewSeconds?: number }
  | { ok: false; reason: SignatureFailureReason; clockSkewSeconds?: number };

const MAC_BYTES = 32;
// Bounds the work an attacker can ask for per request (signatures x secrets HMAC compares).
const MAX_SIGNATURES = 16;
const HEX_MAC = /^[0-9a-fA-F]{64}$/;
const BASE64_MAC = /^[A-Za-z0-9+/]{43}=$/;
/**
 * A well-formed tag of an entry the scheme may use (the accepted one is SIGNATURE_FORMATS' tag):
 * versions `v1`, `v2`... for hmac-sha256 and standard-webhooks; algorithm names `sha256`, `sha512`...
 * for hmac-sha256-body. Other well-formed tags are ignored, anything else is malformed.
 */
const TAG: Readonly<Record<SignatureScheme, RegExp>> = {
  'hmac-sha256': /^v\d+$/,
  'standard-webhooks': /^v\d+$/,
  'hmac-sha256-body': /^[a-z][a-z0-9]*$/,
};

export function verifySignature(input: VerifySignatureInput): VerifySignatureResult {
  const { scheme, secrets, headers, rawBody, now, toleranceSeconds } = input;
  const timed = SIGNATURE_HEADERS[scheme].timestamp !== undefined;
  if (!headers.id || !headers.signature || (timed && !headers.timestamp)) return { ok: false, reason: 'missing_header' };

  // hmac-sha256-body signs no timestamp: there is nothing to check and no replay window.
  let window: { timestamp: number; clockSkewSeconds: number } | undefined;
  if (timed && headers.timestamp) {
    const timestamp = parseSignedTimestamp(scheme, headers.timestamp);
    if (timestamp === undefined) return { ok: false, reason: 'malformed_timestamp' };
    const clockSkewSeconds = now - timestamp;
    // Both directions: a far-future timestamp would otherwise stay replayable for longer.
    if (Math.abs(clockSkewSeconds) > toleranceSeconds) {
      return { ok: false, reason: 'timestamp_out_of_window', clockSkewSeconds };
    }
    window = { timestamp, clockSkewSeconds };
  }
  const skew = window ? { clockSkewSeconds: window.clockSkewSeconds } : {};

  const parsed = parseSignatures(scheme, headers.signature);
  if (parsed.candidates.length === 0) {
    return { ok: false, reason: parsed.malformed ? 'malformed_signature' : 'no_matching_signature', ...skew };
  }

  // The signed content (see signedContent) goes to the HMAC in pieces: no copy of the body.
  const prefix = signedPrefix(scheme, headers.id, timed ? headers.timestamp : undefined);
  let matchedSecretId: string | undefined;
  let matchedRetired = false;
  // No early exit: every secret and every candidate is compared, so timing does not reveal
  // which secret (or which position in the header) matched. A retired secret is compared too, so
  // a provider still signing with it is told apart (secret_retired) from a forger; it never verifies.
  for (const secret of secrets) {
    const key = cachedKey(scheme, secret);
    if (key === undefined) continue;
    const retired = secret.retireAfter !== undefined && secret.retireAfter.getTime() <= (input.nowMs ?? now * 1000);
    const hmac = createHmac('sha256', key);
    if (prefix.length > 0) hmac.update(prefix, 'utf8');
    const expected = hmac.update(rawBody).digest();
    for (const candidate of parsed.candidates) {
      if (!timingSafeEqual(expected, candidate)) continue;
      if (retired) matchedRetired = true;
      else matchedSecretId ??= secret.id;
    }
  }

  if (matchedSecretId !== undefined) return { ok: true, secretId: matchedSecretId, ...window };
  if (matchedRetired) return { ok: false, reason: 'secret_retired', ...skew };
  return { ok: false, reason: parsed.malformed ? 'malformed_signature' : 'no_matching_signature', ...skew };
}

interface ParsedSignatures {
  candidates: Buffer[];
  malformed: boolean;
}

/**
 * `v1=<hex>` or the bare hex (hmac-sha256), `v1,<base64>` (standard-webhooks) or `sha256=<hex>`
 * (hmac-sha256-body), space-separated. Other well-formed tags are ignored so providers can add them without breaking
 * verification.
 */
function parseSignatures(scheme: SignatureScheme, header: string): ParsedSignatures {
  const { tag: accepted, separator, encoding, bareHex } = SIGNATURE_FORMATS[scheme];
  const entries = header.split(' ').filter((entry) => entry.length > 0);
  if (entries.length === 0 || entries.length > MAX_SIGNATURES) return { candidates: [], malformed: true };

  const candidates: Buffer[] = [];
  let malformed = false;
  for (const entry of entries) {
    if (bareHex && HEX_MAC.test(entry)) {
      candidates.push(Buffer.from(entry, 'hex'));
      continue;
    }
    const at = entry.indexOf(separator);
    const tag = at > 0 ? entry.slice(0, at) : '';
    if (!TAG[scheme].test(tag)) {
      malformed = true;
      continue;
    }
    if (tag !== accepted) continue;
    const value = entry.slice(at + 1);
    if (encoding === 'base64' ? BASE64_MAC.test(value) : HEX_MAC.test(value)) {
      const mac = Buffer.from(value, encoding);
      if (mac.length === MAC_BYTES) candidates.push(mac);
      else malformed = true;
    } else {
      malformed = true;
    }
  }
  return { candidates, malformed };
}

interface CachedKey {
  scheme: SignatureScheme;
  value: string;
  key: KeyObject | undefined;
}

// Decoding a secret and building its key object once per secret rather than once per request
// (a Buffer key is turned into a new key object on every createHmac call).
const keyCache = new WeakMap<SigningSecret, CachedKey>();

function cachedKey(scheme: SignatureScheme, secret: SigningSecret): KeyObject | undefined {
  const cached = keyCache.get(secret);
  if (cached && cached.scheme === scheme && cached.value === secret.value) return cached.key;
  const raw = keyOrUndefined(scheme, secret.value);
  const key = raw === undefined ? undefined : createSecretKey(raw);
  keyCache.set(secret, { scheme, value: secret.value, key });
  return key;
}

function keyOrUndefined(scheme: SignatureScheme, value: string): Buffer | undefined {
  // A secret that cannot be decoded, or is empty, can never yield a trustworthy match;
  // config validation reports it at start-up, here it simply never matches.
  try {
    const key = signingKey(scheme, value);
    return key.length > 0 ? key : undefined;
  } catch {
    return undefined;
  }
}
