import { describe, expect, it } from 'vitest';
import { ConfigError } from '#plumbing/config/env.ts';
import { consoleConfigFrom, PUBLIC_DEV_OPERATOR_TOKEN } from './config.ts';

const base = { KAFKA_BROKERS: '127.0.0.1:9092', DATABASE_URL: 'postgres://127.0.0.1/x' };

describe('consoleConfigFrom', () => {
  it('refuses the public dev token unless on loopback with the dev configuration', () => {
    const dev = { ...base, CONSOLE_OPERATOR_TOKEN: PUBLIC_DEV_OPERATOR_TOKEN };
    expect(consoleConfigFrom({ ...dev, CONSOLE_DEV: 'true' }).operatorToken).toBe(PUBLIC_DEV_OPERATOR_TOKEN);
    expect(() => consoleConfigFrom(dev)).toThrow(/public dev token/);
    expect(() => consoleConfigFrom({ ...dev, CONSOLE_DEV: 'true', CONSOLE_HOST: '0.0.0.0' })).toThrow(ConfigError);
    expect(() => consoleConfigFrom({ ...dev, CONSOLE_DEV: 'true', CONSOLE_HOST: '10.1.2.3' })).toThrow(/public dev token/);
  });

  it('asks for a sign-in to read whenever it listens beyond loopback', () => {
    expect(consoleConfigFrom(base).signInToRead).toBe(false);
    expect(consoleConfigFrom({ ...base, CONSOLE_HOST: 'localhost' }).signInToRead).toBe(false);
    const wide = { ...base, CONSOLE_HOST: '0.0.0.0', CONSOLE_OPERATOR_TOKEN: 'an-operator-token-of-ours', CONSOLE_HTTPS: 'true' };
    expect(consoleConfigFrom(wide).signInToRead).toBe(true);
    expect(consoleConfigFrom({ ...wide, CONSOLE_SIGN_IN_TO_READ: 'false' }).signInToRead).toBe(false);
    expect(
      consoleConfigFrom({ ...base, CONSOLE_SIGN_IN_TO_READ: 'true', CONSOLE_OPERATOR_TOKEN: 'an-operator-token-of-ours' }).signInToRead,
    ).toBe(true);
    // Beyond loopback with no token nobody could sign in to read: refused at start-up, with the way out.
    expect(() => consoleConfigFrom({ ...base, CONSOLE_HOST: '0.0.0.0' })).toThrow(/CONSOLE_SIGN_IN_TO_READ=false/);
  });

  it('reads the allowed host names and the HTTPS flag', () => {
    const c = consoleConfigFrom({ ...base, CONSOLE_ALLOWED_HOSTS: ' console.example.com, ops.example.com ,', CONSOLE_HTTPS: 'true' });
    expect(c.allowedHosts).toEqual(['console.example.com', 'ops.example.com']);
    expect(c.https).toBe(true);
    expect(consoleConfigFrom(base).https).toBe(false);
  });
  it('refuses to listen beyond loopback over plain HTTP unless TLS ends in front of it', () => {
    const token = { CONSOLE_OPERATOR_TOKEN: 'an-operator-token-of-ours' };
    for (const host of ['0.0.0.0', '::', '10.1.2.3', 'fd00::2', 'console.internal', '::ffff:10.1.2.3']) {
      expect(() => consoleConfigFrom({ ...base, ...token, CONSOLE_HOST: host }), host).toThrow(/plain HTTP.*CONSOLE_HTTPS=true/s);
      expect(consoleConfigFrom({ ...base, ...token, CONSOLE_HOST: host, CONSOLE_HTTPS: 'true' }).host, host).toBe(host);
    }
    // Leaving the pages open does not lift it: the sign-in and its session cookie still cross the network.
    expect(() => consoleConfigFrom({ ...base, CONSOLE_HOST: '0.0.0.0', CONSOLE_SIGN_IN_TO_READ: 'false' })).toThrow(/plain HTTP/);
    for (const host of ['127.0.0.1', '127.0.0.53', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1', '0:0:0:0:0:0:0:1'])
      expect(consoleConfigFrom({ ...base, CONSOLE_HOST: host }).host, host).toBe(host);
  });

  it("reads the keys sources' secrets are sealed with, and refuses a bad one at start-up", () => {
    expect(consoleConfigFrom(base).secretKeyring).toBeUndefined();
    const key = Buffer.alloc(32, 7).toString('base64');
    const keyring = consoleConfigFrom({ ...base, BRIDGE_SECRET_KEYS: `k1:${key}` }).secretKeyring;
    expect(keyring?.activeKeyId).toBe('k1');
    expect(() => consoleConfigFrom({ ...base, BRIDGE_SECRET_KEYS: 'k1:c2hvcnQ=' })).toThrow(/BRIDGE_SECRET_KEYS: key "k1" is 5 bytes/);
    expect(() => consoleConfigFrom({ ...base, BRIDGE_SECRET_KEYS: `k1:${key}`, BRIDGE_SECRET_KEY_ID: 'k2' })).toThrow(ConfigError);
  });
});
