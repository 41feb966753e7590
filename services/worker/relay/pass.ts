// One relay pass, step by step: lead (hold, fence, confirm), read, cut a batch, send and commit it
// in one Kafka transaction (transaction.ts), move the cursor. The loop and the stop drain (outbox-relay.ts,
// stop-drain.ts) decide when passes run; this decides what one does.
import type { Pool } from 'pg';
import { readNextOutbox, recordOutboxBatch, type NextOutbox, type OutboxPosition, type OutboxRow } from '#domain/store/outbox.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { endSpanWithError, type Tracing } from '#plumbing/observability/tracing.ts';
import { PartitionedSender, type TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import type { FencedProducerUse } from '#plumbing/kafka/transaction-lanes.ts';
import type { Message } from '#plumbing/kafka/types.ts';
import type { CrashPoints } from '../crash-points.ts';
import { HeldBackWatch } from './held-back.ts';
import { fittingPrefix } from './batch-bound.ts';
import { appliedMessages, startPublishSpans } from './records.ts';
import { CursorRestoreGuard } from './restore.ts';
import { commitBatch, type BatchTransactionOptions } from './transaction.ts';

/** What one pass found: published rows (the cursor is now `cursor`), nothing to do, rows held back, not the leader. */
export type Pass =
  | { kind: 'published'; count: number; cursor: OutboxPosition }
  | { kind: 'idle' | 'held-back'; cursor: OutboxPosition }
  | { kind: 'not-leader' | 'rebaselined' };

/** Who may publish (RelayLeadership in leadership.ts). */
export interface Leadership {
  /** Whether this relay leads (taking the lead when it is free); may trust what it last heard. */
  hold(): Promise<boolean>;
  /** Asks the database now whether this relay still leads. */
  confirm(): Promise<boolean>;
  release(): Promise<void>;
}

export interface RelayPassOptions {
  pool: Pool;
  /** Transactional (see createRelayProducer in parts.ts): a replacement fences whatever its predecessor still sends. */
  producer: FencedProducerUse;
  leadership: Leadership;
  topic: string;
  batchSize: number;
  /** Record bytes per partition in one batch beyond its first record (default RELAY_BATCH_BYTES). */
  batchBytes?: number;
  sendTimeoutMs: number;
  logger: Logger;
  /** After each published batch, with its record count (the published-records metric). */
  onPublished?: (count: number) => void;
  crashPoints: CrashPoints;
  /** Warn about an open transaction holding applied records back after this long (default 30 s). */
  heldBackWarnMs?: number;
  /** Partition count of the applied topic: rows are then placed by murmur2 before the send (see PartitionedSender). */
  layout?: (topic: string) => Promise<TopicLayout>;
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

/** What the read step found after the cursor, and the bounds it read within. */
interface Read extends NextOutbox {
  cluster: string | null;
  partitionCount: number;
  batchBytes: number;
}

/** The rows one transaction publishes, a prefix of the read, and their records. */
interface Batch {
  rows: OutboxRow[];
  messages: Message[];
}

export class RelayPass {
  readonly #o: RelayPassOptions;
  readonly #heldBack: HeldBackWatch;
  readonly #restore: CursorRestoreGuard;
  readonly #transaction: BatchTransactionOptions;
  /** The last pass found this relay leading (its producers fenced as leader). */
  #leading = false;
  #more = false;

  constructor(options: RelayPassOptions) {
    this.#o = options;
    this.#heldBack = new HeldBackWatch({ pool: options.pool, logger: options.logger, warnMs: options.heldBackWarnMs });
    this.#restore = new CursorRestoreGuard({ pool: options.pool, logger: options.logger });
    this.#transaction = {
      producer: options.producer,
      // The producer is only a placeholder target: every send goes through a transaction (`via`).
      sender: options.layout
        ? new PartitionedSender({ send: () => Promise.reject(new Error('send through a transaction')) }, options.layout)
        : undefined,
      stillLeading: () => options.leadership.confirm(),
      sendTimeoutMs: options.sendTimeoutMs,
    };
  }

  /**
   * A pass left ready rows behind (a full or byte-bounded batch): the loop goes on without a poll
   * wait. Every pass starts it false: a pass that did not lead has left nothing ready for itself.
   */
  get more(): boolean {
    return this.#more;
  }

  /** One pass: publishes at most one batch. */
  async run(): Promise<Pass> {
    this.#more = false;
    if (!(await this.#lead())) return { kind: 'not-leader' };
    const read = await this.#read();
    if (CursorRestoreGuard.misplaced(read.position, read.cluster)) {
      await this.#restore.rebaseline(read.position, read.cluster);
      return { kind: 'rebaselined' };
    }
    const at = { tx: read.position.tx, id: read.position.id };
    if (read.rows.length === 0) return { kind: (await this.#heldBack.check(read.position)) ? 'held-back' : 'idle', cursor: at };
    this.#heldBack.clear();
    const batch = this.#cut(read);
    this.#o.crashPoints.reach('after-commit-before-publish');
    if (!(await this.#publish(batch))) return { kind: 'not-leader' };
    this.#o.crashPoints.reach('after-publish-before-mark');
    return this.#advance(batch, read.cluster);
  }

  /**
   * Fence, then confirm, then read. A relay that read first, froze past its leadership and then
   * initialised its transactional ids would fence the leader that took over meanwhile and commit
   * its stale rows after that leader's newer ones (K v1, K v2, K v1). Fenced before the read, it
   * is fenced in turn by any leader that starts after it read, and that leader re-reads.
   */
  async #lead(): Promise<boolean> {
    const { producer, leadership, sendTimeoutMs } = this.#o;
    if (!(await leadership.hold())) {
      this.#stepDown();
      return false;
    }
    this.#leading = true;
    await producer.fence(sendTimeoutMs, 'relay_send_timeout', 'applied topic publish');
    if (!(await leadership.confirm())) {
      this.#stepDown();
      return false;
    }
    return true;
  }

  /** The rows after the cursor, within the read's memory bound, and the cluster the cursor must belong to. */
  async #read(): Promise<Read> {
    const batchBytes = this.#o.batchBytes ?? RELAY_BATCH_BYTES;
    const partitionCount = this.#o.layout ? (await this.#o.layout(this.#o.topic)).partitionCount : 1;
    const read = await readNextOutbox(this.#o.pool, {
      limit: this.#o.batchSize,
      maxBytes: batchBytes * Math.min(partitionCount, RELAY_READ_PARTITIONS),
    });
    const cluster = await this.#restore.clusterId();
    return { ...read, cluster, partitionCount, batchBytes };
  }

  /** The longest prefix of the read that fits every partition's byte bound (batch-bound.ts). */
  #cut(read: Read): Batch {
    const built = appliedMessages(read.rows);
    const fitting = fittingPrefix(built, read.partitionCount, read.batchBytes);
    const rows = fitting === read.rows.length ? read.rows : read.rows.slice(0, fitting);
    this.#more = read.cut || fitting < read.rows.length || rows.length === this.#o.batchSize;
    return { rows, messages: fitting === built.length ? built : built.slice(0, fitting) };
  }

  /** Publishes the batch (transaction.ts), with a producer span per row when tracing; false: the lead was lost first. */
  async #publish(batch: Batch): Promise<boolean> {
    const { tracing, topic } = this.#o;
    const spans = tracing?.enabled ? startPublishSpans(tracing, topic, batch.rows) : undefined;
    let committed: boolean;
    try {
      committed = await commitBatch(this.#transaction, topic, batch.messages);
    } catch (error) {
      if (spans) for (const span of spans) endSpanWithError(span, error);
      throw error;
    }
    if (!committed) {
      this.#stepDown();
      const lost = new Error('relay leadership lost before the commit');
      if (spans) for (const span of spans) endSpanWithError(span, lost);
      this.#o.logger.warn({ rows: batch.rows.length }, 'outbox relay lost its leadership before the commit: the batch was aborted');
      return false;
    }
    if (spans) for (const span of spans) span.end();
    return true;
  }

  /** Moves the cursor past the published rows. */
  async #advance(batch: Batch, cluster: string | null): Promise<Pass> {
    const last = batch.rows.at(-1)!;
    // Forward only: a former leader finishing late must not move the cursor back.
    await recordOutboxBatch(this.#o.pool, { last, records: batch.rows.length, cluster });
    this.#o.onPublished?.(batch.rows.length);
    return { kind: 'published', count: batch.rows.length, cursor: { tx: last.tx, id: last.id } };
  }

  /**
   * Leadership lost: the next time this relay leads it fences with new producers, since the
   * leaders in between have bumped the epochs of the ones it holds.
   */
  #stepDown(): void {
    if (this.#leading) this.#o.producer.refence('relay leadership lost');
    this.#leading = false;
  }
}
