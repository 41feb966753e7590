import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '#plumbing/config/env.ts';
import { SecretKeyError } from '#domain/sources/index.ts';
import { ingressConfigFromEnv, ingressEnvSchema } from './config.ts';

const BASE = { KAFKA_BROKERS: '127.0.0.1:9092' };
const KEYS = `k1:${randomBytes(32).toString('base64')}`;

function problems(env: Record<string, string>): string[] {
  try {
    parseConfig(ingressEnvSchema, env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('where the ingress reads its sources (SOURCES_FROM)', () => {
  it('file, the default: WEBHOOK_SOURCES_FILE is required and named', () => {
    expect(problems(BASE)).toEqual([
      'WEBHOOK_SOURCES_FILE: WEBHOOK_SOURCES_FILE is required (path to the webhook sources JSON), or set SOURCES_FROM=postgres',
    ]);
    const config = ingressConfigFromEnv(parseConfig(ingressEnvSchema, { ...BASE, WEBHOOK_SOURCES_FILE: 'infra/dev/dev-sources.json' }), {
      DEMO_SECRET: 'a'.repeat(32),
      DEMO_STD_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      DEMO_BODY_SECRET: 'b'.repeat(32),
      DEMO_STRICT_SECRET: 'c'.repeat(32),
      DEMO_TIME_SECRET: 'd'.repeat(32),
    });
    expect(config.sources.map((s) => s.id)).toContain('demo');
    expect(config.sourcesFromPostgres).toBeUndefined();
  });

  it('postgres: no file needed; DATABASE_URL and BRIDGE_SECRET_KEYS required, each named, with the other problems', () => {
    expect(problems({ SOURCES_FROM: 'postgres' })).toEqual([
      'KAFKA_BROKERS: KAFKA_BROKERS is required (comma-separated host:port list)',
      'DATABASE_URL: DATABASE_URL is required with SOURCES_FROM=postgres (the database the sources live in)',
      "BRIDGE_SECRET_KEYS: BRIDGE_SECRET_KEYS is required with SOURCES_FROM=postgres (id:base64 keys that open the sources' secrets)",
    ]);
    const env = parseConfig(ingressEnvSchema, {
      ...BASE,
      SOURCES_FROM: 'postgres',
      DATABASE_URL: 'postgres://bridge@127.0.0.1:5432/bridge',
      BRIDGE_SECRET_KEYS: KEYS,
    });
    const config = ingressConfigFromEnv(env, {});
    expect(config.sources).toEqual([]);
    expect(config.sourcesFromPostgres?.databaseUrl).toBe('postgres://bridge@127.0.0.1:5432/bridge');
    expect(config.sourcesFromPostgres?.keyring.activeKeyId).toBe('k1');
    expect(() => ingressConfigFromEnv({ ...env, BRIDGE_SECRET_KEYS: 'k1:short' }, {})).toThrow(SecretKeyError);
  });

  it('refuses another value', () => {
    expect(problems({ ...BASE, SOURCES_FROM: 'etcd', WEBHOOK_SOURCES_FILE: 'x' })[0]).toMatch(/^SOURCES_FROM: /);
  });
});

describe('listening sockets (LISTEN_SOCKETS)', () => {
  const env = { ...BASE, SOURCES_FROM: 'postgres', DATABASE_URL: 'postgres://bridge@127.0.0.1:5432/bridge', BRIDGE_SECRET_KEYS: KEYS };

  it('sixteen by default, as many as asked within 1-64', () => {
    expect(ingressConfigFromEnv(parseConfig(ingressEnvSchema, env), {}).listenSockets).toBe(16);
    expect(ingressConfigFromEnv(parseConfig(ingressEnvSchema, { ...env, LISTEN_SOCKETS: '1' }), {}).listenSockets).toBe(1);
    expect(ingressConfigFromEnv(parseConfig(ingressEnvSchema, { ...env, LISTEN_SOCKETS: '64' }), {}).listenSockets).toBe(64);
  });

  it('refuses 0, more than 64 and a fraction, naming the variable', () => {
    for (const value of ['0', '65', '1.5']) expect(problems({ ...env, LISTEN_SOCKETS: value })[0]).toMatch(/^LISTEN_SOCKETS: /);
  });
});
