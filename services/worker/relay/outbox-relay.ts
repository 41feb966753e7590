import type { Pool } from 'pg';
import { readNextOutbox, recordOutboxBatch, type OutboxPosition } from '#domain/store/outbox.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { endSpanWithError, type Tracing } from '#plumbing/observability/tracing.ts';
import { PartitionedSender, type TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import type { FencedProducerUse } from '#plumbing/kafka/transaction-lanes.ts';
import type { CrashPoints } from '../crash-points.ts';
import { HeldBackWatch } from './held-back.ts';
import { fittingPrefix } from './batch-bound.ts';
import { appliedMessages, startPublishSpans } from './records.ts';
import { CursorRestoreGuard } from './restore.ts';
import { drainBeforeStop, STOP_DRAIN_MS } from './stop-drain.ts';

/** What one pass found: published rows (the cursor is now `cursor`), nothing to do, rows held back, not the leader. */
export type Pass =
  | { kind: 'published'; count: number; cursor: OutboxPosition }
  | { kind: 'idle' | 'held-back'; cursor: OutboxPosition }
  | { kind: 'not-leader' | 'rebaselined' };

/** What the worker needs from its running relay. */
export interface RelayHandle {
  /** False once the relay has stopped; readiness reports it. */
  readonly running: boolean;
  /** An apply transaction committed: publish without waiting for the next poll. */
  nudge(): void;
  /** Publishes what is in flight, then stops. */
  stop(): Promise<void>;
}

/** Who may publish (RelayLeadership in leadership.ts). */
export interface Leadership {
  /** Whether this relay leads (taking the lead when it is free); may trust what it last heard. */
  hold(): Promise<boolean>;
  /** Asks the database now whether this relay still leads. */
  confirm(): Promise<boolean>;
  release(): Promise<void>;
}

export interface OutboxRelayOptions {
  pool: Pool;
  /** Transactional (see createRelayProducer in parts.ts): a replacement fences whatever its predecessor still sends. */
  producer: FencedProducerUse;
  leadership: Leadership;
  topic: string;
  batchSize: number;
  /** Record bytes per partition in one batch beyond its first record (default RELAY_BATCH_BYTES). */
  batchBytes?: number;
  pollMs: number;
  sendTimeoutMs: number;
  logger: Logger;
  /** After each published batch, with its record count (the published-records metric). */
  onPublished?: (count: number) => void;
  crashPoints: CrashPoints;
  /** Warn about an open transaction holding applied records back after this long (default 30 s). */
  heldBackWarnMs?: number;
  /** Partition count of the applied topic: rows are then placed by murmur2 before the send (see PartitionedSender). */
  layout?: (topic: string) => Promise<TopicLayout>;
  /** How long stop() goes on publishing what was applied before it (default STOP_DRAIN_MS; 0: not at all). */
  stopDrainMs?: number;
  /** When enabled: a producer span per published row, child of the row's apply span. */
  tracing?: Tracing;
}

/**
 * Default bytes of records per partition in one relay batch (headers included, counted at most;
 * batch-bound.ts): each partition's record batch must stay within the broker's message.max.bytes
 * (1 MiB by default), with room for the batch's own header.
 */
export const RELAY_BATCH_BYTES = 960 * 1024;

/**
 * The read's memory bound: payloads of at most this many partitions' worth of RELAY_BATCH_BYTES.
 * A batch is cut further per partition after the read.
 */
export const RELAY_READ_PARTITIONS = 4;

/**
 * Publishes applied_outbox rows to the applied topic in (tx, id) order, one Kafka transaction per
 * batch, and then moves its cursor past them (one applied_outbox_batches row per batch; migration
 * 0002 explains the order). Only the leader publishes (a session advisory lock), and a replaced or
 * former leader's producer is fenced, so rows of one resource key never land out of order. A crash
 * before the cursor moves republishes the same stored bytes and headers, in the same order, which
 * downstream sees as an identical record. So does a commit the relay gave up on that the broker
 * still carried out (its EndTxn was in flight when the send timeout fired, e.g. at a frozen broker):
 * the batch appears twice, whole and in order (test/relay/relay-fencing.test.ts). Subscribers read
 * committed records (kafkajs's default; set isolation.level=read_committed in Java clients): an
 * aborted attempt is never seen.
 */
export class OutboxRelay {
  readonly #o: OutboxRelayOptions;
  #running = false;
  #loop: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #nudged = false;
  /** The last pass left ready rows behind (a full or byte-bounded batch): go on without a poll wait. */
  #more = false;
  readonly #heldBack: HeldBackWatch;
  readonly #restore: CursorRestoreGuard;
  /** The last pass found this relay leading (its producers fenced as leader). */
  #leading = false;

  readonly #sender: PartitionedSender | undefined;

  constructor(options: OutboxRelayOptions) {
    this.#o = options;
    this.#heldBack = new HeldBackWatch({ pool: options.pool, logger: options.logger, warnMs: options.heldBackWarnMs });
    this.#restore = new CursorRestoreGuard({ pool: options.pool, logger: options.logger });
    // The producer is only a placeholder target: every send goes through a transaction (`via`).
    this.#sender = options.layout
      ? new PartitionedSender({ send: () => Promise.reject(new Error('send through a transaction')) }, options.layout)
      : undefined;
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

  /**
   * Publishes what was applied before the stop (bounded: see STOP_DRAIN_MS), then releases the
   * leadership and closes the producer. Whatever is left, the next leader publishes.
   */
  stop(): Promise<void> {
    this.#running = false;
    this.#wake?.();
    return (this.#stopped ??= (async () => {
      await this.#loop;
      // A relay that never ran (tests drive publishOnce themselves) has nothing of its own to finish.
      if (this.#loop !== undefined) {
        await drainBeforeStop({
          pool: this.#o.pool,
          logger: this.#o.logger,
          drainMs: this.#o.stopDrainMs ?? STOP_DRAIN_MS,
          pollMs: this.#o.pollMs,
          pass: () => this.#pass(),
        });
      }
      await this.#o.leadership.release();
      await this.#o.producer.close();
    })());
  }

  /** One pass: publishes at most one batch. Returns how many rows were published. */
  async publishOnce(): Promise<number> {
    const pass = await this.#pass();
    return pass.kind === 'published' ? pass.count : 0;
  }

  async #pass(): Promise<Pass> {
    const { pool, producer, topic, batchSize, sendTimeoutMs, crashPoints, leadership } = this.#o;
    if (!(await leadership.hold())) {
      this.#stepDown();
      return { kind: 'not-leader' };
    }
    this.#leading = true;
    // Fence, then confirm, then read. A relay that read first, froze past its leadership and then
    // initialised its transactional ids would fence the leader that took over meanwhile and commit
    // its stale rows after that leader's newer ones (K v1, K v2, K v1). Fenced before the read, it
    // is fenced in turn by any leader that starts after it read, and that leader re-reads.
    await producer.fence(sendTimeoutMs, 'relay_send_timeout', 'applied topic publish');
    if (!(await leadership.confirm())) {
      this.#stepDown();
      return { kind: 'not-leader' };
    }
    this.#more = false;
    const batchBytes = this.#o.batchBytes ?? RELAY_BATCH_BYTES;
    const partitionCount = this.#o.layout ? (await this.#o.layout(topic)).partitionCount : 1;
    const read = await readNextOutbox(pool, { limit: batchSize, maxBytes: batchBytes * Math.min(partitionCount, RELAY_READ_PARTITIONS) });
    const { position } = read;
    const cluster = await this.#restore.clusterId();
    if (CursorRestoreGuard.misplaced(position, cluster)) {
      await this.#restore.rebaseline(position, cluster);
      return { kind: 'rebaselined' };
    }
    const at = { tx: position.tx, id: position.id };
    if (read.rows.length === 0) return { kind: (await this.#heldBack.check(position)) ? 'held-back' : 'idle', cursor: at };
    this.#heldBack.clear();
    const built = appliedMessages(read.rows);
    const fitting = fittingPrefix(built, partitionCount, batchBytes);
    const rows = fitting === read.rows.length ? read.rows : read.rows.slice(0, fitting);
    this.#more = read.cut || fitting < read.rows.length || rows.length === batchSize;
    crashPoints.reach('after-commit-before-publish');
    const request = { topic, acks: -1 as const, messages: fitting === built.length ? built : built.slice(0, fitting) };
    const spans = this.#o.tracing?.enabled ? startPublishSpans(this.#o.tracing, topic, rows) : undefined;
    // Bounded: an idempotent producer retries without end during an outage. On a timeout or any
    // failure the producer is replaced, which fences this attempt (createRelayProducer, parts.ts).
    // kafkajs goes on retrying a send after the timeout, and this function goes on with it: once
    // abandoned it must not commit. The next attempt publishes these rows again, and a late commit
    // of this one that reached the coordinator before the replacement's InitProducerId would put
    // them on the topic twice, older versions after newer ones.
    let abandoned = false;
    let committed = false;
    try {
      committed = await producer.use(
        async (p) => {
          const transaction = await p.transaction();
          await (this.#sender ? this.#sender.send(request, transaction) : transaction.send(request));
          // Still the leader right before the commit: a relay that lost it meanwhile leaves the rows
          // to the new leader (which has fenced it, unless it has not started yet).
          if (abandoned || !(await leadership.confirm())) {
            await transaction.abort().catch(() => {});
            return false;
          }
          await transaction.commit();
          return true;
        },
        sendTimeoutMs,
        'relay_send_timeout',
        'applied topic publish',
      );
    } catch (error) {
      abandoned = true;
      if (spans) for (const span of spans) endSpanWithError(span, error);
      throw error;
    }
    if (!committed) {
      this.#stepDown();
      const lost = new Error('relay leadership lost before the commit');
      if (spans) for (const span of spans) endSpanWithError(span, lost);
      this.#o.logger.warn({ rows: rows.length }, 'outbox relay lost its leadership before the commit: the batch was aborted');
      return { kind: 'not-leader' };
    }
    if (spans) for (const span of spans) span.end();
    crashPoints.reach('after-publish-before-mark');
    const last = rows.at(-1)!;
    // Forward only: a former leader finishing late must not move the cursor back.
    await recordOutboxBatch(pool, { last, records: rows.length, cluster });
    this.#o.onPublished?.(rows.length);
    return { kind: 'published', count: rows.length, cursor: { tx: last.tx, id: last.id } };
  }

  /**
   * Leadership lost: the next time this relay leads it fences with new producers, since the
   * leaders in between have bumped the epochs of the ones it holds.
   */
  #stepDown(): void {
    if (this.#leading) this.#o.producer.refence('relay leadership lost');
    this.#leading = false;
  }

  async #run(): Promise<void> {
    let backoffMs = 0;
    while (this.#running) {
      try {
        this.#nudged = false;
        await this.publishOnce();
        backoffMs = 0;
      } catch (error) {
        backoffMs = Math.min(backoffMs === 0 ? 200 : backoffMs * 2, 5_000);
        this.#o.logger.warn({ err: error, backoff_ms: backoffMs }, 'outbox relay pass failed');
      }
      if (!this.#running) break;
      if (backoffMs > 0) await this.#sleep(backoffMs, false);
      else if (!this.#more && !this.#nudged) await this.#sleep(this.#o.pollMs, true);
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
