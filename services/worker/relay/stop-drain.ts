// What a stopping relay still publishes: the rows applied before the stop, within a bound, so a
// rolling restart does not leave the applied topic behind for the next leader's first poll.
import type { Pool } from 'pg';
import { selectNewestOutboxPosition, type OutboxPosition } from '#domain/store/outbox.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { Pass } from './pass.ts';

/**
 * A stopping relay publishes what was applied before the stop for at most STOP_DRAIN_MS in all
 * (a pass in flight when that ends finishes first, bounded by the send timeout), and gives up
 * sooner only where waiting cannot help: rows held back by an open transaction for
 * STOP_HELD_BACK_MS, or another worker leading the relay (at once; that leader publishes them).
 */
export const STOP_DRAIN_MS = 10_000;
const STOP_HELD_BACK_MS = 2_000;

const atOrPast = (a: OutboxPosition, b: OutboxPosition) => BigInt(a.tx) > BigInt(b.tx) || (a.tx === b.tx && BigInt(a.id) >= BigInt(b.id));

export interface StopDrainOptions {
  pool: Pool;
  logger: Logger;
  /** STOP_DRAIN_MS unless set; 0: do not drain. */
  drainMs: number;
  /** How long to wait before looking again at rows held back by an open transaction. */
  pollMs: number;
  /** One relay pass (RelayPass.run, pass.ts). */
  pass: () => Promise<Pass>;
}

/**
 * Passes until the cursor reaches the newest row applied before the stop. A slow pass is not a
 * reason to give up (one batch on a busy broker can take seconds, and the worker's applies are
 * over: nothing else is left to do); a failed one is retried with backoff, within the bound.
 */
export async function drainBeforeStop(options: StopDrainOptions): Promise<void> {
  const { pool, logger, drainMs } = options;
  if (drainMs <= 0) return;
  const started = performance.now();
  let target: OutboxPosition | undefined;
  let cursor: OutboxPosition | undefined;
  let heldBackSince: number | undefined;
  let backoffMs = 0;
  const giveUp = (reason: string) =>
    logger.warn(
      { reason, newest: target, cursor: cursor ?? null, drain_ms: Math.round(performance.now() - started) },
      'outbox relay stopping before it published every applied record: the next relay leader publishes the rest',
    );
  try {
    target = await selectNewestOutboxPosition(pool);
  } catch (error) {
    logger.warn(
      { err: error },
      'outbox relay stopping: cannot read the newest applied record; the next relay leader publishes what is left',
    );
    return;
  }
  if (target === undefined) return;
  for (;;) {
    let pass: Pass | undefined;
    try {
      pass = await options.pass();
      backoffMs = 0;
    } catch (error) {
      backoffMs = Math.min(backoffMs === 0 ? 200 : backoffMs * 2, 2_000);
      logger.warn({ err: error, backoff_ms: backoffMs }, 'outbox relay pass failed while stopping');
    }
    if (pass?.kind === 'not-leader') return logger.info('outbox relay stopping: another worker leads it and publishes the rest');
    if (pass && 'cursor' in pass) cursor = pass.cursor;
    if (pass?.kind === 'idle' || (cursor !== undefined && atOrPast(cursor, target))) return;
    const now = performance.now();
    heldBackSince = pass?.kind === 'held-back' ? (heldBackSince ?? now) : undefined;
    if (now - started >= drainMs) return giveUp('stop_drain_timeout');
    if (heldBackSince !== undefined && now - heldBackSince >= STOP_HELD_BACK_MS) return giveUp('held_back');
    const waitMs = backoffMs > 0 ? backoffMs : pass?.kind === 'held-back' ? options.pollMs : 0;
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(waitMs, drainMs - (now - started))));
  }
}
