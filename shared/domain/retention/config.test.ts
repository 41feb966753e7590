import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '#plumbing/config/env.ts';
import { defaultRetentionSettings, effectiveBodyDays, retentionCutoffs, retentionEnv, retentionSettingsFrom } from './config.ts';

describe('retention settings', () => {
  it('defaults are what an operator expects', () => {
    expect(defaultRetentionSettings).toEqual({
      enabled: true,
      intervalMs: 600_000,
      initialDelayMs: 30_000,
      batchRows: 1000,
      batchBytes: 16 * 1024 * 1024,
      pauseMs: 50,
      maxSeconds: 60,
      bodyDays: 30,
      inboxDays: 180,
      outboxDays: 7,
      lockTimeoutMs: 1000,
      statementTimeoutMs: 5000,
    });
  });

  it('parses the environment (flags as stringbool, 0 days = keep forever)', () => {
    const s = retentionSettingsFrom(
      parseConfig(retentionEnv, {
        RETENTION_ENABLED: 'false',
        RETENTION_INTERVAL_MS: '60000',
        RETENTION_BATCH_ROWS: '500',
        RETENTION_PAUSE_MS: '0',
        RETENTION_BODY_DAYS: '14',
        RETENTION_INBOX_DAYS: '0',
        RETENTION_OUTBOX_DAYS: '3',
      }),
    );
    expect(s).toMatchObject({ enabled: false, intervalMs: 60_000, batchRows: 500, pauseMs: 0, bodyDays: 14, inboxDays: 0, outboxDays: 3 });
    for (const on of ['true', '1', 'yes', 'on']) expect(parseConfig(retentionEnv, { RETENTION_ENABLED: on }).RETENTION_ENABLED).toBe(true);
    for (const off of ['false', '0', 'no', 'off'])
      expect(parseConfig(retentionEnv, { RETENTION_ENABLED: off }).RETENTION_ENABLED).toBe(false);
  });

  it('reports every bad value at once', () => {
    try {
      parseConfig(retentionEnv, {
        RETENTION_ENABLED: 'maybe',
        RETENTION_BATCH_ROWS: '0',
        RETENTION_BODY_DAYS: '-1',
        RETENTION_MAX_SECONDS: 'x',
      });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const problems = (error as ConfigError).problems.join('\n');
      for (const name of ['RETENTION_ENABLED', 'RETENTION_BATCH_ROWS', 'RETENTION_BODY_DAYS', 'RETENTION_MAX_SECONDS'])
        expect(problems).toContain(name);
    }
  });

  it.each([
    // bodyDays, inboxDays, effective body days
    [30, 180, 30],
    [30, 0, 30], // rows kept forever, bodies still pruned
    [0, 180, 180], // bodies kept until the row goes
    [0, 0, 0], // everything kept
    [30, 7, 7], // a row deleted first takes its body with it: pruned (and fingerprinted) just before
    [7, 7, 7],
  ])('body %i d, inbox %i d: bodies pruned after %i d', (bodyDays, inboxDays, expected) => {
    expect(effectiveBodyDays({ bodyDays, inboxDays })).toBe(expected);
  });

  it('cutoffs are that many days before now; 0 is no cutoff', () => {
    const now = new Date('2026-12-01T00:00:00Z');
    expect(retentionCutoffs({ bodyDays: 30, inboxDays: 180, outboxDays: 7 }, now)).toEqual({
      body: new Date('2026-11-01T00:00:00Z'),
      inbox: new Date('2026-06-04T00:00:00Z'),
      outbox: new Date('2026-11-24T00:00:00Z'),
    });
    expect(retentionCutoffs({ bodyDays: 0, inboxDays: 0, outboxDays: 0 }, now)).toEqual({
      body: undefined,
      inbox: undefined,
      outbox: undefined,
    });
  });
});
