import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { applyDevDefaults, devEnvFile, loadDevEnv, runViaNpmScript, writeDevEndpoints } from './dev-defaults.ts';

const noEndpoints = path.join(os.tmpdir(), 'no-such-dir', 'dev-endpoints.json');

describe('dev defaults (npm run bridge and npm run console only)', () => {
  it('is on only under the npm script', () => {
    expect(runViaNpmScript({ npm_lifecycle_event: 'bridge' }, 'bridge')).toBe(true);
    expect(runViaNpmScript({ npm_lifecycle_event: 'console' }, 'console')).toBe(true);
    expect(runViaNpmScript({ npm_lifecycle_event: 'console' }, 'bridge')).toBe(false);
    expect(runViaNpmScript({ npm_lifecycle_event: 'test' }, 'bridge')).toBe(false);
    expect(runViaNpmScript({}, 'console')).toBe(false);
  });

  it('fills unset variables from infra/dev/dev.env and the local defaults; set ones win', () => {
    const env: Record<string, string | undefined> = { KAFKA_BROKERS: 'kafka-1:9092' };
    applyDevDefaults(env, { endpointsFile: noEndpoints });
    expect(env.KAFKA_BROKERS).toBe('kafka-1:9092');
    expect(env.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:5432/bridge');
    expect(env.DEMO_SECRET).toBeTruthy();
    // `npm run bridge -- sources ...` opens the secrets the dev seed sealed with the public dev key.
    expect(env.BRIDGE_SECRET_KEYS).toMatch(/^dev:[A-Za-z0-9+/]+=*$/);
    expect(path.isAbsolute(env.WEBHOOK_SOURCES_FILE!)).toBe(true);
    expect(env.WEBHOOK_SOURCES_FILE!.endsWith(path.join('infra', 'dev', 'dev-sources.json'))).toBe(true);
  });

  // Regression: `npm start` fell back to the embedded Postgres on 54329, and `npm run bridge -- trace`
  // then failed with ECONNREFUSED 127.0.0.1:5432.
  it('uses the broker and database npm start recorded; set variables still win', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dev-endpoints-'));
    const file = path.join(dir, 'dev-endpoints.json');
    writeDevEndpoints(file, { KAFKA_BROKERS: '127.0.0.1:19092', DATABASE_URL: 'postgres://postgres:pw@127.0.0.1:54329/bridge' });
    const env: Record<string, string | undefined> = {};
    applyDevDefaults(env, { endpointsFile: file });
    expect(env.DATABASE_URL).toBe('postgres://postgres:pw@127.0.0.1:54329/bridge');
    expect(env.KAFKA_BROKERS).toBe('127.0.0.1:19092');
    const mine: Record<string, string | undefined> = { DATABASE_URL: 'postgres://me@db:5432/x' };
    applyDevDefaults(mine, { endpointsFile: file });
    expect(mine.DATABASE_URL).toBe('postgres://me@db:5432/x');
  });

  it('falls back to the local defaults when the state file is unreadable', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'dev-endpoints-'));
    const file = path.join(dir, 'dev-endpoints.json');
    writeFileSync(file, '{not json');
    const env: Record<string, string | undefined> = {};
    applyDevDefaults(env, { endpointsFile: file });
    expect(env.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:5432/bridge');
  });

  it('an empty variable counts as unset', () => {
    const env: Record<string, string | undefined> = { KAFKA_BROKERS: '' };
    applyDevDefaults(env, { endpointsFile: noEndpoints });
    expect(env.KAFKA_BROKERS).toBe('127.0.0.1:9092');
  });
});

describe('the start commands (infra/dev)', () => {
  it('take the dev env file and leave the broker and database for them to find', () => {
    const env: Record<string, string | undefined> = { LOG_LEVEL: 'warn' };
    loadDevEnv(env, devEnvFile);
    expect(env.LOG_LEVEL).toBe('warn');
    expect(env.DEMO_SECRET).toBeTruthy();
    expect(env.WEBHOOK_SOURCES_FILE).toBe('infra/dev/dev-sources.json');
    expect(env.KAFKA_BROKERS).toBeUndefined();
    expect(env.DATABASE_URL).toBeUndefined();
  });

  it('without the file (a release build) set nothing', () => {
    const env: Record<string, string | undefined> = {};
    loadDevEnv(env, path.join(os.tmpdir(), 'no-such-dir', 'dev.env'));
    expect(env).toEqual({});
  });
});
