// The relay's diagnosis of a stall it cannot fix itself: rows after the cursor that no reader can
// see yet, because an older transaction somewhere on the cluster has not ended (migration 0002).
import type { Pool } from 'pg';
import { oldestOpenTransaction, outboxHasPending } from '#domain/store/outbox.ts';
import type { Logger } from '#plumbing/logging/logger.ts';

const HELD_BACK_WARN_MS = 30_000;

export class HeldBackWatch {
  readonly #pool: Pool;
  readonly #logger: Logger;
  readonly #warnMs: number;
  #since: number | undefined;
  #lastWarning = 0;

  constructor(options: { pool: Pool; logger: Logger; warnMs?: number | undefined }) {
    this.#pool = options.pool;
    this.#logger = options.logger;
    this.#warnMs = options.warnMs ?? HELD_BACK_WARN_MS;
  }

  /** Rows were readable: whatever held them back has ended. */
  clear(): void {
    this.#since = undefined;
  }

  /**
   * Whether rows exist after the cursor while none is readable yet. Normal for a few milliseconds
   * under load; past warnMs this says which transaction, at most once per warnMs.
   */
  async check(position: { tx: string; id: string }): Promise<boolean> {
    if (!(await outboxHasPending(this.#pool, position))) {
      this.#since = undefined;
      return false;
    }
    const now = Date.now();
    this.#since ??= now;
    if (now - this.#since < this.#warnMs || now - this.#lastWarning < this.#warnMs) return true;
    this.#lastWarning = now;
    const oldest = await oldestOpenTransaction(this.#pool);
    this.#logger.warn(
      { held_back_seconds: Math.round((now - this.#since) / 1000), oldest_open_transaction: oldest ?? null },
      'outbox relay held back: an open transaction older than the pending applied records has not ended',
    );
    return true;
  }
}
