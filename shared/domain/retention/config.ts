import { z } from 'zod';

const positiveInt = z.coerce.number().int().positive();
const nonNegativeInt = z.coerce.number().int().min(0);
/** Whole days; 0 keeps forever. */
const days = z.coerce.number().int().min(0).max(36_500);

/** The retention part of the worker's config schema (merge it into the worker's; the CLI parses it too). */
export const retentionEnv = z.object({
  /** The worker's retention loop; `bridge prune` runs whatever this says. */
  RETENTION_ENABLED: z.stringbool().default(true),
  RETENTION_INTERVAL_MS: positiveInt.default(600_000),
  /** First run this long after the worker starts (then every interval, counted from the end of a run). */
  RETENTION_INITIAL_DELAY_MS: nonNegativeInt.default(30_000),
  RETENTION_BATCH_ROWS: positiveInt.max(100_000).default(1000),
  /** Bound on the raw bodies one body-pruning batch reads into memory (bodies are up to 1 MiB). */
  RETENTION_BATCH_BYTES: positiveInt.default(16 * 1024 * 1024),
  RETENTION_PAUSE_MS: nonNegativeInt.default(50),
  RETENTION_MAX_SECONDS: positiveInt.default(60),
  RETENTION_BODY_DAYS: days.default(30),
  RETENTION_INBOX_DAYS: days.default(180),
  RETENTION_OUTBOX_DAYS: days.default(7),
  RETENTION_LOCK_TIMEOUT_MS: positiveInt.default(1000),
  RETENTION_STATEMENT_TIMEOUT_MS: positiveInt.default(5000),
});

export type RetentionEnv = z.infer<typeof retentionEnv>;

export interface RetentionSettings {
  enabled: boolean;
  intervalMs: number;
  initialDelayMs: number;
  /** Rows per batch (one short transaction each). */
  batchRows: number;
  /** Raw body bytes per body-pruning batch (at least one row is taken). */
  batchBytes: number;
  pauseMs: number;
  /** A run starts no new batch after this long (0: no bound, e.g. `bridge prune`). */
  maxSeconds: number;
  /** Prune raw bodies of settled inbox rows and anomalies after this many days (0: keep until the row goes). */
  bodyDays: number;
  /** Delete settled inbox rows and anomalies after this many days (0: keep forever). */
  inboxDays: number;
  /** Delete published applied_outbox rows (not the newest per key) and relay batches after this many days (0: keep forever). */
  outboxDays: number;
  lockTimeoutMs: number;
  statementTimeoutMs: number;
}

export function retentionSettingsFrom(env: RetentionEnv): RetentionSettings {
  return {
    enabled: env.RETENTION_ENABLED,
    intervalMs: env.RETENTION_INTERVAL_MS,
    initialDelayMs: env.RETENTION_INITIAL_DELAY_MS,
    batchRows: env.RETENTION_BATCH_ROWS,
    batchBytes: env.RETENTION_BATCH_BYTES,
    pauseMs: env.RETENTION_PAUSE_MS,
    maxSeconds: env.RETENTION_MAX_SECONDS,
    bodyDays: env.RETENTION_BODY_DAYS,
    inboxDays: env.RETENTION_INBOX_DAYS,
    outboxDays: env.RETENTION_OUTBOX_DAYS,
    lockTimeoutMs: env.RETENTION_LOCK_TIMEOUT_MS,
    statementTimeoutMs: env.RETENTION_STATEMENT_TIMEOUT_MS,
  };
}

export const defaultRetentionSettings: RetentionSettings = retentionSettingsFrom(retentionEnv.parse({}));

const DAY_MS = 86_400_000;

/** What is old enough at `now`; undefined: that part is kept forever. */
export interface RetentionCutoffs {
  /** Bodies of settled rows last updated before this are pruned. */
  body: Date | undefined;
  /** Settled rows last updated before this are deleted (their bodies are pruned first). */
  inbox: Date | undefined;
  /** Published outbox rows and relay batches published before this are deleted. */
  outbox: Date | undefined;
}

/**
 * A row that is deleted loses its body with it, so the body is due no later than the row:
 * body pruning uses the earlier of the two ages (and the inbox age when bodies alone are kept forever).
 */
export function effectiveBodyDays(settings: Pick<RetentionSettings, 'bodyDays' | 'inboxDays'>): number {
  const { bodyDays, inboxDays } = settings;
  if (inboxDays === 0) return bodyDays;
  if (bodyDays === 0) return inboxDays;
  return Math.min(bodyDays, inboxDays);
}

export function retentionCutoffs(settings: Pick<RetentionSettings, 'bodyDays' | 'inboxDays' | 'outboxDays'>, now: Date): RetentionCutoffs {
  const before = (d: number) => (d === 0 ? undefined : new Date(now.getTime() - d * DAY_MS));
  return { body: before(effectiveBodyDays(settings)), inbox: before(settings.inboxDays), outbox: before(settings.outboxDays) };
}
