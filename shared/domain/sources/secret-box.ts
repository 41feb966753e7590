import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

// Signing secrets stored in Postgres are sealed with AES-256-GCM (an authenticated cipher: a
// changed byte fails to open instead of yielding another secret) under a key from the environment.
// Each sealed value names its key, so the key can itself be rotated: add a new key, make it the
// active one, run `bridge sources rekey`, then drop the old key.
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const KEY_ID = /^[A-Za-z0-9_.-]{1,32}$/;

export class SecretKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretKeyError';
  }
}

/** What the sealing needs: the keys by id, and which one seals new values. */
export interface SecretKeyring {
  activeKeyId: string;
  keys: ReadonlyMap<string, Buffer>;
}

/**
 * BRIDGE_SECRET_KEYS: `id:base64key[,id:base64key...]`, each key 32 bytes; BRIDGE_SECRET_KEY_ID picks
 * the key that seals new values (default: the first). Returns undefined when no key is set: a
 * deployment without one keeps its sources in the file.
 */
export function keyringFromEnv(env: Record<string, string | undefined>): SecretKeyring | undefined {
  const raw = env.BRIDGE_SECRET_KEYS?.trim();
  if (!raw) return undefined;
  const keys = new Map<string, Buffer>();
  for (const entry of raw.split(',')) {
    const at = entry.indexOf(':');
    const id = entry.slice(0, at).trim();
    if (at < 0 || !KEY_ID.test(id))
      throw new SecretKeyError(`BRIDGE_SECRET_KEYS: each entry is id:base64key, with an id matching ${KEY_ID.source}`);
    const key = Buffer.from(entry.slice(at + 1).trim(), 'base64');
    if (key.length !== KEY_BYTES)
      throw new SecretKeyError(`BRIDGE_SECRET_KEYS: key "${id}" is ${key.length} bytes once decoded, ${KEY_BYTES} required`);
    if (keys.has(id)) throw new SecretKeyError(`BRIDGE_SECRET_KEYS: key id "${id}" appears twice`);
    keys.set(id, key);
  }
  const activeKeyId = env.BRIDGE_SECRET_KEY_ID?.trim() || [...keys.keys()][0]!;
  if (!keys.has(activeKeyId)) throw new SecretKeyError(`BRIDGE_SECRET_KEY_ID "${activeKeyId}" is not one of the ids in BRIDGE_SECRET_KEYS`);
  return { activeKeyId, keys };
}

/** The associated data: a sealed value opens only for the row it was sealed for. */
function aad(sourceId: string, secretId: string): Buffer {
  return Buffer.from(`bridge-source-secret\u0000${sourceId}\u0000${secretId}`, 'utf8');
}

export function sealSecret(keyring: SecretKeyring, sourceId: string, secretId: string, value: string): { keyId: string; sealed: Buffer } {
  const key = keyring.keys.get(keyring.activeKeyId)!;
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(aad(sourceId, secretId));
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return { keyId: keyring.activeKeyId, sealed: Buffer.concat([nonce, body, cipher.getAuthTag()]) };
}

/** Throws SecretKeyError naming the key (never the value) when the key is missing or the value does not open. */
export function openSecret(keyring: SecretKeyring, sourceId: string, secretId: string, keyId: string, sealed: Buffer): string {
  const key = keyring.keys.get(keyId);
  if (key === undefined)
    throw new SecretKeyError(`secret "${secretId}" of source "${sourceId}" is sealed with key "${keyId}", which BRIDGE_SECRET_KEYS lacks`);
  if (sealed.length < NONCE_BYTES + TAG_BYTES) throw new SecretKeyError(`secret "${secretId}" of source "${sourceId}" is truncated`);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, NONCE_BYTES));
    decipher.setAAD(aad(sourceId, secretId));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new SecretKeyError(
      `secret "${secretId}" of source "${sourceId}" does not open with key "${keyId}" (another key, or the row was altered)`,
    );
  }
}

/** A fresh signing secret for a scheme: 32 random bytes, written the way the scheme's providers expect. */
export function generateSecret(scheme: string): string {
  const bytes = randomBytes(32);
  return scheme === 'standard-webhooks' ? `whsec_${bytes.toString('base64')}` : bytes.toString('base64url');
}
