import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { applyDevDefaults, runViaNpmScript } from './dev-defaults.ts';

describe('dev defaults (npm run bridge only)', () => {
  it('is on only under the npm script', () => {
    expect(runViaNpmScript({ npm_lifecycle_event: 'bridge' })).toBe(true);
    expect(runViaNpmScript({ npm_lifecycle_event: 'test' })).toBe(false);
    expect(runViaNpmScript({})).toBe(false);
  });

  it('fills unset variables from infra/dev.env and the local defaults; set ones win', () => {
    const env: Record<string, string | undefined> = { KAFKA_BROKERS: 'kafka-1:9092' };
    applyDevDefaults(env);
    expect(env.KAFKA_BROKERS).toBe('kafka-1:9092');
    expect(env.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:5432/bridge');
    expect(env.DEMO_SECRET).toBeTruthy();
    expect(path.isAbsolute(env.WEBHOOK_SOURCES_FILE!)).toBe(true);
    expect(env.WEBHOOK_SOURCES_FILE!.endsWith(path.join('infra', 'dev-sources.json'))).toBe(true);
  });
});
