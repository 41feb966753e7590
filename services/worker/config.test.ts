import { describe, expect, it } from 'vitest';
import { parseConfig } from '#plumbing/config/env.ts';
import { DEFAULT_STOP_TIMEOUT_MS, workerConfigFromEnv, workerEnvSchema } from './config.ts';
import { STOP_DRAIN_MS } from './relay/index.ts';

const required = { KAFKA_BROKERS: '127.0.0.1:9092', DATABASE_URL: 'postgres://u@127.0.0.1/db' };
const configOf = (env: Record<string, string>) => workerConfigFromEnv(parseConfig(workerEnvSchema, { ...required, ...env }));

describe('RELAY_STOP_DRAIN_MS', () => {
  it('bounds how long a stopping relay publishes: STOP_DRAIN_MS by default, any number of ms, 0 for not at all', () => {
    expect(configOf({}).relayStopDrainMs).toBe(STOP_DRAIN_MS);
    expect(configOf({ RELAY_STOP_DRAIN_MS: '20000' }).relayStopDrainMs).toBe(20_000);
    expect(configOf({ RELAY_STOP_DRAIN_MS: '0' }).relayStopDrainMs).toBe(0);
  });

  it('refuses what is not a whole number of milliseconds, naming the variable', () => {
    expect(() => configOf({ RELAY_STOP_DRAIN_MS: '-1' })).toThrow(/RELAY_STOP_DRAIN_MS/);
    expect(() => configOf({ RELAY_STOP_DRAIN_MS: '1.5' })).toThrow(/RELAY_STOP_DRAIN_MS/);
  });
});

describe('WORKER_STOP_TIMEOUT_MS', () => {
  it('bounds the whole stop: 25 s by default, inside a 30 s grace period and above the relay drain', () => {
    expect(configOf({}).stopTimeoutMs).toBe(DEFAULT_STOP_TIMEOUT_MS);
    const kubernetesGraceMs = 30_000;
    expect(kubernetesGraceMs).toBeGreaterThan(DEFAULT_STOP_TIMEOUT_MS);
    expect(DEFAULT_STOP_TIMEOUT_MS).toBeGreaterThan(STOP_DRAIN_MS);
    expect(configOf({ WORKER_STOP_TIMEOUT_MS: '8000' }).stopTimeoutMs).toBe(8_000);
  });

  it('refuses 0 and what is not a whole number of milliseconds, naming the variable', () => {
    for (const bad of ['0', '-1', '2.5', 'soon']) expect(() => configOf({ WORKER_STOP_TIMEOUT_MS: bad })).toThrow(/WORKER_STOP_TIMEOUT_MS/);
  });
});

describe('WORKER_RELAY', () => {
  it('is refused with a reason, not silently ignored, since the relay thread was removed', () => {
    expect(() => configOf({ WORKER_RELAY: 'thread' })).toThrow(/WORKER_RELAY was removed/);
    expect(() => configOf({})).not.toThrow();
  });
});

describe('SOURCES_FROM', () => {
  it('file by default: reconcile only when the file declares it', () => {
    const config = configOf({});
    expect(config.liveSources).toBeUndefined();
    expect(config.reconcile).toBeUndefined();
  });

  it('postgres: the reconcile machinery always runs, its sources empty until the first snapshot; the file is not read', () => {
    const config = configOf({ SOURCES_FROM: 'postgres', WEBHOOK_SOURCES_FILE: '/nonexistent/sources.json', RECONCILE_CONCURRENCY: '3' });
    expect(config.reconcile).toMatchObject({ sources: [], concurrency: 3 });
    expect(config.liveSources).toBeDefined();
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => configOf({ SOURCES_FROM: 'etcd' })).toThrow(/SOURCES_FROM/);
  });
});

describe('WORKER_ROLE', () => {
  it('all by default; apply and relay split the worker in two processes', () => {
    expect(configOf({}).role).toBe('all');
    expect(configOf({ WORKER_ROLE: 'apply' }).role).toBe('apply');
    expect(configOf({ WORKER_ROLE: 'relay' }).role).toBe('relay');
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => configOf({ WORKER_ROLE: 'both' })).toThrow(/WORKER_ROLE/);
  });

  it('gives a relay process an admin port of its own by default, so it can run beside a worker', () => {
    expect(configOf({}).adminPort).toBe(9465);
    expect(configOf({ WORKER_ROLE: 'apply' }).adminPort).toBe(9465);
    expect(configOf({ WORKER_ROLE: 'relay' }).adminPort).toBe(9466);
    expect(configOf({ WORKER_ROLE: 'relay', ADMIN_PORT: '9999' }).adminPort).toBe(9999);
  });
});
