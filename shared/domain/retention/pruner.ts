import type { Pool, PoolClient } from 'pg';
import { storedBodyFingerprint } from '#domain/contract/index.ts';
import { retentionCutoffs, type RetentionCutoffs, type RetentionSettings } from './config.ts';
import { commit, rollback } from '#domain/store/session.ts';
import * as store from '#domain/store/retention.ts';

export type RetentionTable = 'inbox_events' | 'inbox_anomalies' | 'applied_outbox' | 'applied_outbox_batches';
export type RetentionAction = 'pruned_body' | 'deleted';

/** Every (table, action) retention knows, in the order a report lists them. */
export const RETENTION_TARGETS: ReadonlyArray<{ table: RetentionTable; action: RetentionAction }> = [
  { table: 'inbox_events', action: 'pruned_body' },
  { table: 'inbox_events', action: 'deleted' },
  { table: 'inbox_anomalies', action: 'pruned_body' },
  { table: 'inbox_anomalies', action: 'deleted' },
  { table: 'applied_outbox', action: 'deleted' },
  { table: 'applied_outbox_batches', action: 'deleted' },
];

export interface RetentionCount {
  table: RetentionTable;
  action: RetentionAction;
  rows: number;
  /** The cutoff in force (ISO time); null: this part is kept forever. */
  olderThan: string | null;
}

export interface RetentionBatch {
  table: RetentionTable;
  action: RetentionAction;
  /** Rows pruned or deleted by this batch (at most batchRows). */
  rows: number;
  /** applied_outbox: rows walked (at most batchRows); the newest per key are walked and kept. */
  scanned: number;
  ms: number;
}

/**
 * complete: nothing eligible is left; time_limit: stopped at maxSeconds with work left; stopped: the
 * caller aborted (shutdown); skipped: another process holds the retention lock; failed: a batch failed
 * (it rolled back; the batches before it stay done).
 */
export type RetentionResult = 'complete' | 'time_limit' | 'stopped' | 'skipped' | 'failed';

export interface RetentionRunReport {
  result: RetentionResult;
  startedAt: Date;
  seconds: number;
  batches: number;
  counts: RetentionCount[];
  error?: unknown;
}

export interface RetentionPlan {
  at: Date;
  counts: RetentionCount[];
}

export interface RetentionPrunerOptions {
  pool: Pool;
  settings: RetentionSettings;
  clock?: () => Date;
  /** After each committed batch. */
  onBatch?: (batch: RetentionBatch) => void;
}

/**
 * The envelope fingerprint kept when a body is pruned (what deduplication compares a later
 * redelivery with: shared/domain/apply/decide.ts sameEventContent). From the JSON alone, not
 * today's contract: a body an earlier release accepted still gets one. null: not a JSON object.
 */
export function bodyFingerprint(payload: string): string | null {
  return storedBodyFingerprint(payload) ?? null;
}

interface Step {
  rows: number;
  scanned?: number;
  /** A full batch (or a byte-bounded one): there may be more. */
  more: boolean;
  /** After COMMIT (a batch that rolled back leaves no trace, in memory either). */
  committed?: () => void;
}

interface Phase {
  table: RetentionTable;
  action: RetentionAction;
  step: (client: PoolClient) => Promise<Step>;
}

const countKey = (table: string, action: string) => `${table}:${action}`;

/**
 * Retention, in small batches: each batch is one short transaction (lock_timeout, statement_timeout,
 * rows taken oldest first with SKIP LOCKED where anything else could hold them), so no lock is held
 * for long and the apply path never waits behind a run. The worker's loop and `bridge prune` use it.
 */
export class RetentionPruner {
  readonly #pool: Pool;
  readonly #settings: RetentionSettings;
  readonly #clock: () => Date;
  readonly #onBatch: ((batch: RetentionBatch) => void) | undefined;
  /**
   * Where the outbox walk stopped when a run ended before the walk did (time limit, shutdown,
   * failure): the next run of this pruner goes on from there instead of walking the rows it keeps
   * (the newest per key) again; a walk that reaches its bound starts over next time.
   */
  #outboxAfter = { tx: '0', id: '0' };

  constructor(options: RetentionPrunerOptions) {
    this.#pool = options.pool;
    this.#settings = options.settings;
    this.#clock = options.clock ?? (() => new Date());
    this.#onBatch = options.onBatch;
  }

  /** What a run would prune or delete now (changes nothing): one consistent snapshot. */
  async plan(): Promise<RetentionPlan> {
    const at = this.#clock();
    const cutoffs = retentionCutoffs(this.#settings, at);
    const client = await this.#pool.connect();
    try {
      await store.beginRetentionPlan(client);
      const rows = new Map<string, number>();
      if (cutoffs.body) {
        rows.set(countKey('inbox_events', 'pruned_body'), await store.countInboxBodies(client, cutoffs.body));
        rows.set(countKey('inbox_anomalies', 'pruned_body'), await store.countAnomalyBodies(client, cutoffs.body));
      }
      if (cutoffs.inbox) {
        rows.set(countKey('inbox_events', 'deleted'), await store.countInboxRows(client, cutoffs.inbox));
        rows.set(countKey('inbox_anomalies', 'deleted'), await store.countAnomalyRows(client, cutoffs.inbox));
      }
      if (cutoffs.outbox) {
        const bound = await store.selectOutboxBound(client, cutoffs.outbox);
        rows.set(countKey('applied_outbox', 'deleted'), bound ? await store.countOutboxRows(client, bound) : 0);
        rows.set(countKey('applied_outbox_batches', 'deleted'), await store.countOutboxBatches(client, cutoffs.outbox));
      }
      await commit(client);
      return { at, counts: countsFrom(cutoffs, rows) };
    } catch (error) {
      await rollback(client).catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /**
   * One run: every part in turn, one batch at a time, until nothing eligible is left, maxSeconds
   * (default: the settings'; 0: no bound) has passed, or the signal aborts. Never throws: a failure
   * is the report's result. Only one run at a time per database (a session advisory lock on the
   * run's own connection, which is closed afterwards, so the lock can never stay behind in a pool).
   */
  async run(options: { signal?: AbortSignal; maxSeconds?: number } = {}): Promise<RetentionRunReport> {
    const startedAt = this.#clock();
    const started = performance.now();
    const cutoffs = retentionCutoffs(this.#settings, startedAt);
    const rows = new Map<string, number>();
    let batches = 0;
    const report = (result: RetentionResult, error?: unknown): RetentionRunReport => ({
      result,
      startedAt,
      seconds: (performance.now() - started) / 1000,
      batches,
      counts: countsFrom(cutoffs, rows),
      ...(error === undefined ? {} : { error }),
    });

    let client: PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      return report('failed', error);
    }
    let locked = false;
    let failed: unknown;
    try {
      locked = await store.tryRetentionLock(client);
      if (!locked) return report('skipped');
      const maxSeconds = options.maxSeconds ?? this.#settings.maxSeconds;
      const deadline = maxSeconds > 0 ? started + maxSeconds * 1000 : Infinity;
      // Lanes take turns, one batch each, so a backlog in one table does not starve the others;
      // within a lane the parts run in order (a row's body is pruned before the row is deleted).
      const lanes = this.#lanes(cutoffs).filter((lane) => lane.length > 0);
      while (lanes.length > 0) {
        for (let i = 0; i < lanes.length;) {
          if (options.signal?.aborted) return report('stopped');
          if (performance.now() >= deadline) return report('time_limit');
          const phase = lanes[i]![0]!;
          const t0 = performance.now();
          const step = await this.#batch(client, phase);
          batches += 1;
          const key = countKey(phase.table, phase.action);
          rows.set(key, (rows.get(key) ?? 0) + step.rows);
          this.#onBatch?.({
            table: phase.table,
            action: phase.action,
            rows: step.rows,
            scanned: step.scanned ?? step.rows,
            ms: performance.now() - t0,
          });
          if (!step.more) lanes[i]!.shift();
          if (lanes[i]!.length === 0) lanes.splice(i, 1);
          else i += 1;
          if (step.rows > 0 && this.#settings.pauseMs > 0) await sleep(this.#settings.pauseMs, options.signal);
        }
      }
      return report('complete');
    } catch (error) {
      failed = error;
      return report('failed', error);
    } finally {
      if (locked && failed === undefined) await store.releaseRetentionLock(client).catch(() => {});
      // Destroyed, never returned to the pool: the session lock goes with the connection.
      client.release(true);
    }
  }

  async #batch(client: PoolClient, phase: Phase): Promise<Step> {
    await store.beginRetentionBatch(client, {
      lockTimeoutMs: this.#settings.lockTimeoutMs,
      statementTimeoutMs: this.#settings.statementTimeoutMs,
    });
    try {
      const step = await phase.step(client);
      await commit(client);
      step.committed?.();
      return step;
    } catch (error) {
      await rollback(client).catch(() => {});
      throw error;
    }
  }

  #lanes(cutoffs: RetentionCutoffs): Phase[][] {
    const { batchRows, batchBytes } = this.#settings;
    type Deletion = (client: PoolClient, args: { olderThan: Date; rows: number }) => Promise<number>;
    const deleting = (table: RetentionTable, remove: Deletion, cutoff: Date): Phase => ({
      table,
      action: 'deleted',
      step: async (client) => {
        const n = await remove(client, { olderThan: cutoff, rows: batchRows });
        return { rows: n, more: n >= batchRows };
      },
    });
    const inbox: Phase[] = [];
    const anomalies: Phase[] = [];
    const outbox: Phase[] = [];
    const { body, inbox: inboxCutoff, outbox: outboxCutoff } = cutoffs;
    if (body) {
      inbox.push({
        table: 'inbox_events',
        action: 'pruned_body',
        step: async (client) => {
          const rows = await store.selectInboxBodies(client, { olderThan: body, rows: batchRows, bytes: batchBytes });
          const taken = rows.filter((r): r is typeof r & { payload: string } => r.payload !== null);
          if (taken.length === 0) return { rows: 0, more: false };
          const pruned = await store.pruneInboxBodies(
            client,
            taken.map((r) => ({ tenant_id: r.tenant_id, event_id: r.event_id, fingerprint: bodyFingerprint(r.payload) })),
          );
          return { rows: pruned, more: rows.length >= batchRows || taken.length < rows.length };
        },
      });
      anomalies.push({
        table: 'inbox_anomalies',
        action: 'pruned_body',
        step: async (client) => {
          const n = await store.pruneAnomalyBodies(client, { olderThan: body, rows: batchRows });
          return { rows: n, more: n >= batchRows };
        },
      });
    }
    if (inboxCutoff) {
      inbox.push(deleting('inbox_events', store.deleteInboxRows, inboxCutoff));
      anomalies.push(deleting('inbox_anomalies', store.deleteAnomalyRows, inboxCutoff));
    }
    if (outboxCutoff) {
      // The bound is read once per run, in the walk's first batch; the walk then moves forward.
      let bound: { tx: string; id: string } | null | undefined;
      outbox.push({
        table: 'applied_outbox',
        action: 'deleted',
        step: async (client) => {
          if (bound === undefined) bound = (await store.selectOutboxBound(client, outboxCutoff)) ?? null;
          if (bound === null) return { rows: 0, scanned: 0, more: false };
          const r = await store.deleteOutboxRows(client, { after: this.#outboxAfter, bound, rows: batchRows });
          const more = r.scanned >= batchRows;
          const next = more && r.last_tx !== null && r.last_id !== null ? { tx: r.last_tx, id: r.last_id } : { tx: '0', id: '0' };
          return { rows: r.deleted, scanned: r.scanned, more, committed: () => (this.#outboxAfter = next) };
        },
      });
      outbox.push(deleting('applied_outbox_batches', store.deleteOutboxBatches, outboxCutoff));
    }
    return [inbox, anomalies, outbox];
  }
}

function cutoffOf(cutoffs: RetentionCutoffs, table: RetentionTable, action: RetentionAction): Date | undefined {
  if (table === 'applied_outbox' || table === 'applied_outbox_batches') return cutoffs.outbox;
  return action === 'pruned_body' ? cutoffs.body : cutoffs.inbox;
}

function countsFrom(cutoffs: RetentionCutoffs, rows: Map<string, number>): RetentionCount[] {
  return RETENTION_TARGETS.map(({ table, action }) => ({
    table,
    action,
    rows: rows.get(countKey(table, action)) ?? 0,
    olderThan: cutoffOf(cutoffs, table, action)?.toISOString() ?? null,
  }));
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
