import { withTransaction } from '../../shared/db/transaction.ts';
import type { Producer } from 'kafkajs';
import type { Pool, PoolClient } from 'pg';
import { appliedHeaders, applySql } from '../../shared/apply/index.ts';
import { BridgeError } from '../../shared/errors/bridge-error.ts';
import type { Logger } from '../../shared/logging/logger.ts';
import { PartitionedSender, type TopicLayout } from '../../shared/kafka/partitioned-send.ts';
import type { CrashPoints } from './crash-points.ts';

const HELD_BACK_WARN_MS = 30_000;

export interface OutboxRelayOptions {
  pool: Pool;
  producer: Producer;
  topic: string;
  batchSize: number;
  pollMs: number;
  sendTimeoutMs: number;
  logger: Logger;
  /** After each published batch, with its record count (the published-records metric). */
  onPublished?: (count: number) => void;
  crashPoints: CrashPoints;
  /** Warn about an open transaction holding applied records back after this long (default 30 s). */
  heldBackWarnMs?: number;
  /** Layout of the applied topic: rows are then sent one partition leader per send() (see PartitionedSender). */
  layout?: (topic: string) => Promise<TopicLayout>;
}

interface OutboxRow {
  id: string;
  tx: string;
  event_id: string;
  key: string;
  payload: string;
  source_topic: string;
  source_partition: number;
  source_offset: string;
}

/**
 * Publishes applied_outbox rows to the applied topic in (tx, id) order and then moves its cursor
 * past them (one applied_outbox_batches row per batch; migration 0002 explains the order).
 * One relay at a time holds the leader lock (per transaction), so rows of one resource key can
 * never be published out of order by two workers; a crash before the cursor moves republishes the
 * same stored bytes and headers, which downstream sees as an identical record.
 */
export class OutboxRelay {
  readonly #o: OutboxRelayOptions;
  #running = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #nudged = false;
  #heldBackSince: number | undefined;
  #lastHeldBackWarning = 0;

  readonly #sender: PartitionedSender | undefined;

  constructor(options: OutboxRelayOptions) {
    this.#o = options;
    this.#sender = options.layout ? new PartitionedSender(options.producer, options.layout) : undefined;
  }

  get running(): boolean {
    return this.#running;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** Called after an apply transaction commits, so applied records go out without waiting a poll. */
  nudge(): void {
    this.#nudged = true;
    this.#wake?.();
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#wake?.();
    await this.#loop;
  }

  /**
   * Rows exist after the cursor but none is readable yet: an older transaction is still open
   * somewhere on the cluster (migration 0002). Normal for a few milliseconds under load; past
   * heldBackWarnMs the relay says which transaction, at most once per heldBackWarnMs.
   */
  async #checkHeldBack(client: PoolClient, position: { tx: string; id: string }): Promise<void> {
    const { rows } = await client.query<{ pending: boolean }>(applySql.OUTBOX_HAS_PENDING, [position.tx, position.id]);
    if (!rows[0]?.pending) {
      this.#heldBackSince = undefined;
      return;
    }
    const now = Date.now();
    this.#heldBackSince ??= now;
    const warnMs = this.#o.heldBackWarnMs ?? HELD_BACK_WARN_MS;
    if (now - this.#heldBackSince < warnMs || now - this.#lastHeldBackWarning < warnMs) return;
    this.#lastHeldBackWarning = now;
    const oldest = (await client.query<Record<string, unknown>>(applySql.OLDEST_OPEN_TRANSACTION)).rows[0];
    this.#o.logger.warn(
      { held_back_seconds: Math.round((now - this.#heldBackSince) / 1000), oldest_open_transaction: oldest ?? null },
      'outbox relay held back: an open transaction older than the pending applied records has not ended',
    );
  }

  /** One pass: publishes at most one batch. Returns how many rows were published. */
  async publishOnce(): Promise<number> {
    const { pool, producer, topic, batchSize, sendTimeoutMs, crashPoints } = this.#o;
    const published = await withTransaction(pool, async (client) => {
      const lock = await client.query<{ leader: boolean }>(applySql.TRY_RELAY_LEADER_LOCK);
      if (!lock.rows[0]?.leader) return 0;
      const position = (await client.query<{ tx: string; id: string }>(applySql.SELECT_RELAY_POSITION)).rows[0]!;
      const { rows } = await client.query<OutboxRow>(applySql.SELECT_NEXT_OUTBOX, [position.tx, position.id, batchSize]);
      if (rows.length === 0) {
        await this.#checkHeldBack(client, position);
        return 0;
      }
      this.#heldBackSince = undefined;
      crashPoints.reach('after-commit-before-publish');
      const messages = rows.map((r) => ({
        key: r.key,
        value: r.payload,
        headers: appliedHeaders({ eventId: r.event_id, topic: r.source_topic, partition: r.source_partition, offset: r.source_offset }),
      }));
      // An idempotent producer retries without end during an outage; the timeout bounds the open transaction.
      const request = { topic, acks: -1 as const, messages };
      await withTimeout(this.#sender ? this.#sender.send(request) : producer.send(request), sendTimeoutMs);
      crashPoints.reach('after-publish-before-mark');
      const last = rows.at(-1)!;
      await client.query(applySql.RECORD_OUTBOX_BATCH, [last.tx, last.id, rows.length]);
      return rows.length;
    });
    if (published > 0) this.#o.onPublished?.(published);
    return published;
  }

  async #run(): Promise<void> {
    let backoffMs = 0;
    while (this.#running) {
      let published = 0;
      try {
        this.#nudged = false;
        published = await this.publishOnce();
        backoffMs = 0;
      } catch (error) {
        backoffMs = Math.min(backoffMs === 0 ? 200 : backoffMs * 2, 5_000);
        this.#o.logger.warn({ err: error, backoff_ms: backoffMs }, 'outbox relay pass failed');
      }
      if (!this.#running) break;
      if (backoffMs > 0) await this.#sleep(backoffMs, false);
      else if (published < this.#o.batchSize && !this.#nudged) await this.#sleep(this.#o.pollMs, true);
    }
  }

  #sleep(ms: number, wakeOnNudge: boolean): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        if (wakeOnNudge || !this.#running) done();
      };
    });
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new BridgeError('relay_send_timeout', `applied topic send not acknowledged within ${ms} ms`, { retryable: true })),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
