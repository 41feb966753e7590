import { randomUUID } from 'node:crypto';
import type { Admin, Kafka, KafkaMessage } from 'kafkajs';

export interface PartitionRange {
  partition: number;
  /** First offset read. */
  from: bigint;
  /** First offset NOT read (exclusive end). */
  to: bigint;
}

export interface ReadRecord {
  topic: string;
  partition: number;
  message: KafkaMessage;
}

export interface ReadRangeOptions {
  kafka: Kafka;
  admin: Admin;
  topic: string;
  ranges: PartitionRange[];
  /**
   * Called per fetched batch with its records of one partition in range, in offset order; awaited
   * before the next. The records count as handled when it returns; `handled(r)` marks r and the
   * records before it handled earlier, so that a rebalance thrown by `heartbeat` (rethrow it) hands
   * over only the records after r again.
   */
  onRecords: (records: ReadRecord[], heartbeat: () => Promise<void>, handled: (upTo: ReadRecord) => void) => Promise<void>;
  /** Fails when no progress is made for this long (default 30 s). */
  idleTimeoutMs?: number;
  groupPrefix?: string;
  /**
   * Bytes one fetch may bring per partition (kafkajs's default: 1 MiB). A reader of a few records
   * sets it low, or every fetch decodes a megabyte per partition beyond its range; a record larger
   * than this still comes (the broker always returns at least one batch).
   */
  maxBytesPerPartition?: number;
}

/** [from, to) per partition from watermarks; empty ranges are dropped. */
export function clampRanges(
  ranges: PartitionRange[],
  watermarks: Array<{ partition: number; low: string; high: string }>,
): PartitionRange[] {
  return ranges
    .map((r) => {
      const w = watermarks.find((x) => x.partition === r.partition);
      if (!w) return r;
      const low = BigInt(w.low);
      const high = BigInt(w.high);
      const from = r.from < low ? low : r.from;
      const to = r.to > high ? high : r.to;
      return { partition: r.partition, from, to };
    })
    .filter((r) => r.to > r.from);
}

/** What a batch contributes to a range: its messages in [from, to), and whether all of it was looked at. */
export interface BatchScan<M> {
  inRange: M[];
  /**
   * False when the batch went stale while being looked at (a seek is pending: a rebalance or a
   * restart re-positioned the partition) or the consumer is stopping: nothing of it may count,
   * not even its last offset, or the partition would be marked done with records never handled.
   */
  complete: boolean;
}

/** Pure: the part of a fetched batch inside the range. `valid` is checked before each message. */
export function takeInRange<M extends { offset: string }>(
  range: PartitionRange,
  messages: readonly M[],
  valid: () => boolean,
): BatchScan<M> {
  const inRange: M[] = [];
  for (const message of messages) {
    if (!valid()) return { inRange: [], complete: false };
    const offset = BigInt(message.offset);
    if (offset < range.from) continue;
    if (offset >= range.to) break;
    inRange.push(message);
  }
  return { inRange, complete: true };
}

/** An error of kafkajs itself (a rebalance seen by a heartbeat, a lost connection): kafkajs handles it. */
function isKafkaError(error: unknown): boolean {
  // By name: kafkajs is CommonJS and its error classes are no named exports under ESM.
  return error instanceof Error && error.name.startsWith('KafkaJS');
}

/**
 * Reads exact offset ranges with a short-lived consumer in a throwaway group of its own. It never
 * commits, so the real groups' offsets and membership are untouched; the group is deleted after.
 *
 * A partition is done only once every record of its range was handed to onRecords and handled: a
 * record counts as handled when onRecords returns, or earlier when it calls handled() (then a
 * rebalance thrown by its heartbeat hands over only the records after it again). Each join of the
 * group (the first, and again after a rebalance or a restart, which forget positions and pauses)
 * seeks every unfinished partition to its first unhandled offset and pauses the others. An error
 * of onRecords that is not kafkajs's fails the read at once, with that error.
 */
export async function readRange(options: ReadRangeOptions): Promise<{ read: number }> {
  const { kafka, admin, topic } = options;
  const ranges = options.ranges.filter((r) => r.to > r.from);
  if (ranges.length === 0) return { read: 0 };
  const groupId = `${options.groupPrefix ?? 'bridge-reader'}-${randomUUID()}`;
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: 30_000,
    heartbeatInterval: 3000,
    allowAutoTopicCreation: false,
    ...(options.maxBytesPerPartition === undefined ? {} : { maxBytesPerPartition: options.maxBytesPerPartition }),
  });
  // Copies: `from` moves as records are handled.
  const remaining = new Map(ranges.map((r) => [r.partition, { ...r }]));
  let read = 0;
  let failure: Error | undefined;
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const done = new Promise<void>((resolve, reject) => {
      let lastProgress = Date.now();
      const progressed = () => {
        lastProgress = Date.now();
      };
      const idleMs = options.idleTimeoutMs ?? 30_000;
      const fail = (error: Error) => {
        failure ??= error;
        clearInterval(watchdog);
        reject(failure);
      };
      const watchdog = setInterval(() => {
        if (Date.now() - lastProgress > idleMs) {
          const left = [...remaining.values()].map((r) => `${r.partition}@${r.from}..${r.to}`).join(', ');
          fail(new Error(`no progress reading ${topic} for ${idleMs} ms (still to read: ${left})`));
        }
      }, 500);
      const finish = () => {
        clearInterval(watchdog);
        resolve();
      };

      // Called synchronously inside kafkajs's join, before the first fetch of the new generation.
      consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
        const assigned = payload.memberAssignment[topic] ?? [];
        const idle = assigned.filter((p) => !remaining.has(p));
        if (idle.length > 0) consumer.pause([{ topic, partitions: idle }]);
        for (const p of assigned) {
          const range = remaining.get(p);
          if (range) consumer.seek({ topic, partition: p, offset: range.from.toString() });
        }
      });
      consumer.on(consumer.events.CRASH, ({ payload }) => {
        if (!payload.restart) fail(payload.error);
      });

      consumer
        .run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          eachBatch: async ({ batch, heartbeat, isRunning, isStale, resolveOffset }) => {
            const range = remaining.get(batch.partition);
            if (!range || failure) return;
            const scan = takeInRange(range, batch.messages, () => isRunning() && !isStale());
            // A stale batch is dropped whole: the pending seek reads again from range.from.
            if (!scan.complete) return;
            const records: ReadRecord[] = scan.inRange.map((message) => ({ topic, partition: batch.partition, message }));
            let counted = 0;
            // Resolving only moves this throwaway consumer's in-memory position; nothing is committed.
            const handled = (upTo: ReadRecord) => {
              const next = BigInt(upTo.message.offset) + 1n;
              if (next <= range.from) return;
              range.from = next;
              resolveOffset(upTo.message.offset);
              while (counted < records.length && BigInt(records[counted]!.message.offset) < next) counted += 1;
              progressed();
            };
            if (records.length > 0) {
              try {
                await options.onRecords(
                  records,
                  async () => {
                    await heartbeat();
                    progressed();
                  },
                  handled,
                );
              } catch (error) {
                read += counted;
                // A rebalance (or a lost connection) seen by the heartbeat: kafkajs rejoins, and the
                // join seeks to the first record not handled.
                if (isKafkaError(error)) throw error;
                fail(error as Error);
                return;
              }
              handled(records[records.length - 1]!);
              read += counted;
            }
            // Every message up to the batch's last offset was looked at and its records handled;
            // compacted topics and transaction markers leave gaps, which count as read too.
            const last = batch.lastOffset();
            resolveOffset(last);
            if (BigInt(last) + 1n > range.from) range.from = BigInt(last) + 1n;
            if (range.from >= range.to) {
              remaining.delete(batch.partition);
              consumer.pause([{ topic, partitions: [batch.partition] }]);
              if (remaining.size === 0) finish();
            }
          },
        })
        .catch((error: unknown) => fail(error as Error));
    });
    await done;
  } finally {
    await consumer.disconnect().catch(() => {});
    await admin.deleteGroups([groupId]).catch(() => {});
  }
  return { read };
}
