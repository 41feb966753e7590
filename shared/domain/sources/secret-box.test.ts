import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateSecret, keyringFromEnv, openSecret, sealSecret, SecretKeyError } from './secret-box.ts';

const key = () => randomBytes(32).toString('base64');

describe('secret box', () => {
  it('opens what it sealed, and only for the row it was sealed for', () => {
    const keyring = keyringFromEnv({ BRIDGE_SECRET_KEYS: `k1:${key()}` })!;
    const { keyId, sealed } = sealSecret(keyring, 'demo', 's1', 'a-secret-value-of-some-length');
    expect(keyId).toBe('k1');
    expect(sealed.includes(Buffer.from('a-secret-value'))).toBe(false);
    expect(openSecret(keyring, 'demo', 's1', keyId, sealed)).toBe('a-secret-value-of-some-length');
    // Moved to another source's row, or altered by one byte: refused, never another value.
    expect(() => openSecret(keyring, 'other', 's1', keyId, sealed)).toThrow(SecretKeyError);
    const altered = Buffer.from(sealed);
    altered[14] = altered[14]! ^ 1;
    expect(() => openSecret(keyring, 'demo', 's1', keyId, altered)).toThrow(/does not open/);
  });

  it('seals with the active key and opens with any key it still has', () => {
    const [a, b] = [key(), key()];
    const old = keyringFromEnv({ BRIDGE_SECRET_KEYS: `a:${a}` })!;
    const both = keyringFromEnv({ BRIDGE_SECRET_KEYS: `a:${a},b:${b}`, BRIDGE_SECRET_KEY_ID: 'b' })!;
    const sealedOld = sealSecret(old, 'demo', 's1', 'value-sealed-under-a');
    expect(openSecret(both, 'demo', 's1', sealedOld.keyId, sealedOld.sealed)).toBe('value-sealed-under-a');
    expect(sealSecret(both, 'demo', 's1', 'x').keyId).toBe('b');
    const onlyB = keyringFromEnv({ BRIDGE_SECRET_KEYS: `b:${b}` })!;
    expect(() => openSecret(onlyB, 'demo', 's1', 'a', sealedOld.sealed)).toThrow(/key "a", which BRIDGE_SECRET_KEYS lacks/);
  });

  it('refuses a malformed keyring with a message that names the problem', () => {
    expect(keyringFromEnv({})).toBeUndefined();
    expect(() => keyringFromEnv({ BRIDGE_SECRET_KEYS: 'nokey' })).toThrow(/id:base64key/);
    expect(() => keyringFromEnv({ BRIDGE_SECRET_KEYS: `k:${randomBytes(16).toString('base64')}` })).toThrow(
      /16 bytes once decoded, 32 required/,
    );
    expect(() => keyringFromEnv({ BRIDGE_SECRET_KEYS: `k:${key()}`, BRIDGE_SECRET_KEY_ID: 'z' })).toThrow(/not one of the ids/);
  });

  it('generates secrets the schemes accept', () => {
    expect(generateSecret('standard-webhooks')).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(generateSecret('hmac-sha256'), 'base64url')).toHaveLength(32);
  });
});
