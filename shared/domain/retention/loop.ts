import type { Pool } from 'pg';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { RetentionSettings } from './config.ts';
import { RetentionPruner, type RetentionBatch, type RetentionRunReport } from './pruner.ts';

export interface RetentionLoopOptions {
  run: (signal: AbortSignal) => Promise<RetentionRunReport>;
  initialDelayMs: number;
  intervalMs: number;
  onRun?: (report: RetentionRunReport) => void;
}

/**
 * Runs retention after initialDelayMs, then intervalMs after the end of each run (runs never
 * overlap). stop() aborts a run in progress between two batches and waits for it.
 */
export class RetentionLoop {
  readonly #options: RetentionLoopOptions;
  readonly #abort = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  #current: Promise<void> | undefined;
  #runs = 0;

  constructor(options: RetentionLoopOptions) {
    this.#options = options;
  }

  /** Runs finished so far (whatever their result). */
  get runs(): number {
    return this.#runs;
  }

  start(): this {
    this.#schedule(this.#options.initialDelayMs);
    return this;
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#current;
  }

  #schedule(ms: number): void {
    if (this.#abort.signal.aborted) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#current = this.#runOnce().finally(() => {
        this.#current = undefined;
        this.#schedule(this.#options.intervalMs);
      });
    }, ms);
    // Never what keeps a process alive.
    this.#timer.unref();
  }

  async #runOnce(): Promise<void> {
    let report: RetentionRunReport;
    try {
      report = await this.#options.run(this.#abort.signal);
    } catch (error) {
      report = { result: 'failed', startedAt: new Date(), seconds: 0, batches: 0, counts: [], error };
    }
    this.#runs += 1;
    try {
      this.#options.onRun?.(report);
    } catch {
      // An observer's failure must not stop the loop.
    }
  }
}

/** One log line per run: the result, how long, how many batches, and rows per table and action. */
export function logRetentionRun(logger: Logger, report: RetentionRunReport): void {
  const rows: Record<string, number> = {};
  for (const c of report.counts) rows[`${c.table}.${c.action}`] = c.rows;
  const fields = { result: report.result, seconds: Number(report.seconds.toFixed(3)), batches: report.batches, rows };
  if (report.result === 'failed') logger.error({ ...fields, err: report.error }, 'retention run failed');
  else if (report.result === 'skipped') logger.info(fields, 'retention run skipped: another process holds the retention lock');
  else logger.info(fields, 'retention run');
}

export interface StartRetentionOptions {
  pool: Pool;
  settings: RetentionSettings;
  logger: Logger;
  onBatch?: (batch: RetentionBatch) => void;
  onRun?: (report: RetentionRunReport) => void;
}

/** The worker's retention: the pruner on the worker's pool, on a timer, logged and observed. */
export function startRetentionLoop(options: StartRetentionOptions): RetentionLoop {
  const pruner = new RetentionPruner({
    pool: options.pool,
    settings: options.settings,
    ...(options.onBatch ? { onBatch: options.onBatch } : {}),
  });
  return new RetentionLoop({
    run: (signal) => pruner.run({ signal }),
    initialDelayMs: options.settings.initialDelayMs,
    intervalMs: options.settings.intervalMs,
    onRun: (report) => {
      logRetentionRun(options.logger, report);
      options.onRun?.(report);
    },
  }).start();
}
