export interface RetrySchedule {
  /** Delay before retry level i+1 (retry.1 first). Levels past the end reuse the last delay. */
  delaysMs: number[];
  /** Fraction of each delay drawn at random either way (0.2 = ±20%), so retries of one burst spread out. */
  jitter: number;
}

export const defaultRetrySchedule: RetrySchedule = { delaysMs: [5_000, 30_000, 120_000, 600_000], jitter: 0.2 };

/** The delay for retry level `level` (1-based), with jitter; `random` returns [0, 1). */
export function retryDelayMs(schedule: RetrySchedule, level: number, random: () => number = Math.random): number {
  if (!Number.isInteger(level) || level < 1) throw new RangeError(`retry level must be a positive integer, got ${level}`);
  if (schedule.delaysMs.length === 0) return 0;
  const base = schedule.delaysMs[Math.min(level, schedule.delaysMs.length) - 1]!;
  const spread = base * schedule.jitter;
  return Math.max(0, Math.round(base - spread + random() * 2 * spread));
}

/** Capped exponential backoff for health probes: initial, 2x, 4x ... up to max. */
export function probeDelayMs(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt));
}
