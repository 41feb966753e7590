import type { Kafka } from '#plumbing/kafka/types.ts';
import type { Pool } from 'pg';
import { createPool } from '#plumbing/db/pool.ts';
import { withTransaction } from '#plumbing/db/transaction.ts';
import { appliedHeaders } from '#domain/apply/index.ts';
import {
  outboxHasPending,
  oldestOpenTransaction,
  readClusterId,
  readNextOutbox,
  rebaselineOutbox,
  recordOutboxBatch,
  RELAY_LEADER_LOCK_KEY,
  selectNewestOutboxPosition,
  type OutboxPosition,
  type OutboxRow,
  type RelayPosition,
} from '#domain/store/outbox.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { endSpanWithError, SpanKind, type Span, type Tracing } from '#plumbing/observability/tracing.ts';
import { PartitionedSender, type TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import { createRecoveringProducer } from '#plumbing/kafka/producers.ts';
import { TransactionLanes, type FencedProducerUse } from '#plumbing/kafka/transaction-lanes.ts';
import type { CrashPoints } from '../crash-points.ts';
import { RelayLeadership } from './leadership.ts';

const HELD_BACK_WARN_MS = 30_000;

/**
 * A stopping relay publishes what was applied before the stop for at most STOP_DRAIN_MS in all
 * (a pass in flight when that ends finishes first, bounded by the send timeout), and gives up
 * sooner only where waiting cannot help: rows held back by an open transaction for
 * STOP_HELD_BACK_MS, or another worker leading the relay (at once; that leader publishes them).
 */
export const STOP_DRAIN_MS = 10_000;
const STOP_HELD_BACK_MS = 2_000;

const atOrPast = (a: OutboxPosition, b: OutboxPosition) => BigInt(a.tx) > BigInt(b.tx) || (a.tx === b.tx && BigInt(a.id) >= BigInt(b.id));

/** What one pass found: published rows (the cursor is now `cursor`), nothing to do, rows held back, not the leader. */
type Pass =
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

/** Who may publish (leadership.ts). */
export interface Leadership {
  /** Whether this relay leads (taking the lead when it is free); may trust what it last heard. */
  hold(): Promise<boolean>;
  /** Asks the database now whether this relay still leads. */
  confirm(): Promise<boolean>;
  release(): Promise<void>;
}

export interface OutboxRelayOptions {
  pool: Pool;
  /** Transactional (see createRelayProducer): a replacement fences whatever its predecessor still sends. */
  producer: FencedProducerUse;
  leadership: Leadership;
  topic: string;
  batchSize: number;
  /** Payload bytes per batch beyond its first row (default RELAY_BATCH_BYTES). */
  batchBytes?: number;
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
  /** How long stop() goes on publishing what was applied before it (default STOP_DRAIN_MS; 0: not at all). */
  stopDrainMs?: number;
  /** When enabled: a producer span per published row, child of the row's apply span. */
  tracing?: Tracing;
}

/**
 * How many transactional ids the relay takes in turn (TransactionLanes). One producer back to
 * back runs about 40-55 transactions a second here, each waiting for the previous commit's markers;
 * two run 280-310 (bench/publish-cost.ts, test/relay/back-to-back-transactions.test.ts).
 */
export const RELAY_TRANSACTION_LANES = 2;

/**
 * The relay's producer: transactional, with fixed transactional ids shared by every worker of the
 * bridge (`transactionalId`, then `transactionalId.1`, ... for further lanes). A send that timed
 * out cannot be cancelled in kafkajs (it retries for a long while, and a frozen broker may still
 * hold its request in a socket buffer); the replacement producer's InitProducerId bumps the epoch,
 * so the broker refuses the old send if it ever arrives, and aborts its open transaction. Without
 * that, two workers (or one, after a timeout) could land an older batch after a newer one:
 * `K v2, K v1`, and compaction would keep v1. TransactionLanes initialises every id again after
 * any failure, so this holds for each lane.
 */
export function createRelayProducer(
  kafka: Kafka,
  transactionalId: string,
  logger: Logger,
  connectTimeoutMs: number,
  lanes = RELAY_TRANSACTION_LANES,
): FencedProducerUse {
  return new TransactionLanes(
    Array.from({ length: lanes }, (_, lane) =>
      createRecoveringProducer(kafka, {
        name: lane === 0 ? 'outbox-relay' : `outbox-relay-${lane}`,
        logger,
        connectTimeoutMs,
        transactionalId: lane === 0 ? transactionalId : `${transactionalId}.${lane}`,
        transactionTimeoutMs: 60_000,
      }),
    ),
  );
}

export interface RelayPartsSettings {
  kafka: Kafka;
  databaseUrl: string;
  /** The same for every worker of one bridge (one database, one applied topic). */
  transactionalId: string;
  logger: Logger;
  /** Also bounds a new producer's connect. */
  sendTimeoutMs: number;
  /** See RelayLeadership; default 20 s. */
  leaderIdleTimeoutMs?: number;
}

/**
 * The relay's own two Postgres sessions. Its writes are its cursor rows
 * (and a re-baseline after a restore): they commit without waiting for the WAL flush, since losing
 * the newest in a Postgres crash only republishes identical records, which the relay allows for.
 */
export function createRelayPool(settings: {
  url: string;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs?: number | undefined;
  logger: Logger;
}): Pool {
  return createPool({
    url: settings.url,
    max: 2,
    statementTimeoutMs: settings.statementTimeoutMs,
    ...(settings.idleInTransactionTimeoutMs === undefined ? {} : { idleInTransactionTimeoutMs: settings.idleInTransactionTimeoutMs }),
    applicationName: 'worker-relay',
    synchronousCommit: false,
    logger: settings.logger,
  });
}

/** The producer and the leadership a relay needs, as every worker builds them. */
export function relayParts(settings: RelayPartsSettings): Pick<OutboxRelayOptions, 'producer' | 'leadership'> {
  return {
    producer: createRelayProducer(settings.kafka, settings.transactionalId, settings.logger, settings.sendTimeoutMs),
    leadership: new RelayLeadership({
      url: settings.databaseUrl,
      lockKey: RELAY_LEADER_LOCK_KEY,
      idleSessionTimeoutMs: settings.leaderIdleTimeoutMs ?? 20_000,
      retryMs: 1_000,
      logger: settings.logger,
    }),
  };
}

/**
 * Default payload bytes per relay batch: each partition's record batch must stay within the
 * broker's message.max.bytes (1 MiB by default), and the batch is held in memory while it is sent.
 * The ingress bounds its batches the same way (its maxBatchBytes, 512 KiB).
 */
export const RELAY_BATCH_BYTES = 512 * 1024;

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
  #heldBackSince: number | undefined;
  #cluster: string | null | undefined;
  #lastHeldBackWarning = 0;
  /** The last pass found this relay leading (its producers fenced as leader). */
  #leading = false;

  readonly #sender: PartitionedSender | undefined;

  constructor(options: OutboxRelayOptions) {
    this.#o = options;
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
      if (this.#loop !== undefined) await this.#drain();
      await this.#o.leadership.release();
      await this.#o.producer.close();
    })());
  }

  /**
   * Passes until the cursor reaches the newest row applied before the stop. A slow pass is not a
   * reason to give up (one batch on a busy broker can take seconds, and the worker's applies are
   * over: nothing else is left to do); a failed one is retried with backoff, within the bound.
   */
  async #drain(): Promise<void> {
    const { pool, logger } = this.#o;
    const drainMs = this.#o.stopDrainMs ?? STOP_DRAIN_MS;
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
        pass = await this.#pass();
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
      const waitMs = backoffMs > 0 ? backoffMs : pass?.kind === 'held-back' ? this.#o.pollMs : 0;
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(waitMs, drainMs - (now - started))));
    }
  }

  /**
   * Whether rows exist after the cursor while none is readable yet: an older transaction is still
   * open somewhere on the cluster (migration 0002). Normal for a few milliseconds under load; past
   * heldBackWarnMs the relay says which transaction, at most once per heldBackWarnMs.
   */
  async #checkHeldBack(position: { tx: string; id: string }): Promise<boolean> {
    const { pool } = this.#o;
    if (!(await outboxHasPending(pool, position))) {
      this.#heldBackSince = undefined;
      return false;
    }
    const now = Date.now();
    this.#heldBackSince ??= now;
    const warnMs = this.#o.heldBackWarnMs ?? HELD_BACK_WARN_MS;
    if (now - this.#heldBackSince < warnMs || now - this.#lastHeldBackWarning < warnMs) return true;
    this.#lastHeldBackWarning = now;
    const oldest = await oldestOpenTransaction(pool);
    this.#o.logger.warn(
      { held_back_seconds: Math.round((now - this.#heldBackSince) / 1000), oldest_open_transaction: oldest ?? null },
      'outbox relay held back: an open transaction older than the pending applied records has not ended',
    );
    return true;
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
    const { position, rows, cut } = await readNextOutbox(pool, { limit: batchSize, maxBytes: this.#o.batchBytes ?? RELAY_BATCH_BYTES });
    const cluster = await this.#clusterId();
    if (position.ahead || (position.cluster_id !== null && cluster !== null && position.cluster_id !== cluster)) {
      await this.#rebaseline(position, cluster);
      return { kind: 'rebaselined' };
    }
    const at = { tx: position.tx, id: position.id };
    if (rows.length === 0) return { kind: (await this.#checkHeldBack(position)) ? 'held-back' : 'idle', cursor: at };
    this.#heldBackSince = undefined;
    this.#more = cut || rows.length === batchSize;
    crashPoints.reach('after-commit-before-publish');
    const messages = rows.map((r) => ({
      key: r.key,
      value: r.payload,
      headers: appliedHeaders({
        eventId: r.event_id,
        topic: r.source_topic,
        partition: r.source_partition,
        offset: r.source_offset,
        key: r.key,
        payload: r.payload,
        traceparent: r.traceparent,
        tracestate: r.tracestate,
      }),
    }));
    const request = { topic, acks: -1 as const, messages };
    const spans = this.#o.tracing?.enabled ? this.#startSpans(rows) : undefined;
    // Bounded: an idempotent producer retries without end during an outage. On a timeout or any
    // failure the producer is replaced, which fences this attempt (see createRelayProducer).
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

  /** One producer span per row, child of its apply span (the context stored with the row). */
  #startSpans(rows: readonly OutboxRow[]): Span[] {
    const tracing = this.#o.tracing!;
    const topic = this.#o.topic;
    return rows.map((r) =>
      tracing.startSpan(
        `send ${topic}`,
        {
          kind: SpanKind.PRODUCER,
          attributes: {
            'messaging.system': 'kafka',
            'messaging.operation.type': 'send',
            'messaging.destination.name': topic,
            'bridge.event_id': r.event_id,
          },
        },
        tracing.extract({ traceparent: r.traceparent ?? undefined, tracestate: r.tracestate ?? undefined }),
      ),
    );
  }

  /** This cluster's system identifier, read once; null where the role may not read it. */
  async #clusterId(): Promise<string | null> {
    if (this.#cluster === undefined) {
      try {
        this.#cluster = await readClusterId(this.#o.pool);
      } catch (error) {
        this.#o.logger.warn(
          { err: error },
          'cannot read the cluster identity (pg_control_system); only the transaction id check guards the cursor',
        );
        this.#cluster = null;
      }
    }
    return this.#cluster;
  }

  /**
   * The cursor was recorded on another cluster (the database was dumped and restored) or lies
   * beyond this cluster's transaction ids: rows written now could sort before it and never be
   * published, or rows the old cluster published could sort after it and be published again after
   * newer ones. Every row of the old cluster is renumbered (rebaselineOutbox) and the cursor set
   * below every new row; nothing published is lost track of, nothing unpublished is skipped.
   */
  async #rebaseline(position: RelayPosition, cluster: string | null): Promise<void> {
    const { pool, logger } = this.#o;
    await withTransaction(pool, async (client) => {
      const moved = await rebaselineOutbox(client, { cursor: position, cluster });
      logger.warn(
        { cursor_tx: position.tx, cursor_id: position.id, cursor_cluster: position.cluster_id, cluster, rows_renumbered: moved },
        'outbox relay cursor re-baselined: it was recorded on another cluster or beyond its transaction ids (a dump and restore?)',
      );
    });
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
