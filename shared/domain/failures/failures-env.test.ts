import { describe, expect, it } from 'vitest';
import { parseConfig, ConfigError } from '#plumbing/config/env.ts';
import { failureSettingsFrom, failuresEnv } from './failures-env.ts';

describe('failuresEnv', () => {
  it('has production defaults and no fault injection', () => {
    const settings = failureSettingsFrom(parseConfig(failuresEnv, {}));
    expect(settings.schedule).toEqual({ delaysMs: [5_000, 30_000, 120_000, 600_000], jitter: 0.2 });
    expect(settings.faults).toEqual([]);
    expect(settings.probeInitialMs).toBe(250);
    expect(settings.probeMaxMs).toBe(10_000);
  });

  it('takes shortened delays, jitter and faults from the environment', () => {
    const settings = failureSettingsFrom(
      parseConfig(failuresEnv, { RETRY_DELAYS_MS: '200, 400,800,1600', RETRY_JITTER: '0', FAULT_INJECT: 'transient:a/theme/b:2' }),
    );
    expect(settings.schedule).toEqual({ delaysMs: [200, 400, 800, 1600], jitter: 0 });
    expect(settings.faults).toEqual([{ kind: 'transient', resource: 'a/theme/b', count: 2 }]);
  });

  it('reports every problem', () => {
    try {
      parseConfig(failuresEnv, { RETRY_DELAYS_MS: '5s', RETRY_JITTER: '2', FAULT_INJECT: 'bogus' });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems).toHaveLength(3);
    }
  });
});
