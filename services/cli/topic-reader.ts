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
  /** Called per fetched batch, records of one partition in offset order; awaited before the next. */
  onRecords: (records: ReadRecord[], heartbeat: () => Promise<void>) => Promise<void>;
  /** Fails when no progress is made for this long (default 30 s). */
  idleTimeoutMs?: number;
  groupPrefix?: string;
}

/** [from, to) per partition from watermarks; empty ranges are dropped. */
export function clampRanges(ranges: PartitionRange[], watermarks: Array<{ partition: number; low: string; high: string }>): PartitionRange[] {
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

/**
 * Reads exact offset ranges with a short-lived consumer in a throwaway group of its own. It never
 * commits, so the real groups' offsets and membership are untouched; the group is deleted after.
 */
export async function readRange(options: ReadRangeOptions): Promise<{ read: number }> {
  const { kafka, admin, topic } = options;
  const ranges = options.ranges.filter((r) => r.to > r.from);
  if (ranges.length === 0) return { read: 0 };
  const groupId = `${options.groupPrefix ?? 'bridge-cli'}-${randomUUID()}`;
  const consumer = kafka.consumer({ groupId, sessionTimeout: 30_000, heartbeatInterval: 3000, allowAutoTopicCreation: false });
  const remaining = new Map(ranges.map((r) => [r.partition, r]));
  let read = 0;
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const done = new Promise<void>((resolve, reject) => {
      let lastProgress = Date.now();
      const idleMs = options.idleTimeoutMs ?? 30_000;
      const watchdog = setInterval(() => {
        if (Date.now() - lastProgress > idleMs) {
          clearInterval(watchdog);
          const left = [...remaining.values()].map((r) => `${r.partition}@${r.from}..${r.to}`).join(', ');
          reject(new Error(`no progress reading ${topic} for ${idleMs} ms (still to read: ${left})`));
        }
      }, 500);
      const finish = () => {
        clearInterval(watchdog);
        resolve();
      };
      consumer
        .run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          eachBatch: async ({ batch, heartbeat, isRunning, isStale, resolveOffset }) => {
            const range = remaining.get(batch.partition);
            if (!range) return;
            const records: ReadRecord[] = [];
            for (const message of batch.messages) {
              if (!isRunning() || isStale()) break;
              const offset = BigInt(message.offset);
              if (offset < range.from) continue;
              if (offset >= range.to) break;
              records.push({ topic, partition: batch.partition, message });
            }
            // Resolving only moves this throwaway consumer's in-memory position; nothing is committed.
            if (records.length > 0) {
              await options.onRecords(records, heartbeat);
              read += records.length;
              const last = records[records.length - 1]!.message.offset;
              range.from = BigInt(last) + 1n;
              resolveOffset(last);
              lastProgress = Date.now();
            }
            // Compacted topics and transaction markers leave gaps: the batch's last offset also counts.
            const lastInBatch = batch.lastOffset();
            if (records.length === 0 && BigInt(lastInBatch) < range.from) resolveOffset(lastInBatch);
            if (BigInt(lastInBatch) + 1n >= range.to || range.from >= range.to) {
              remaining.delete(batch.partition);
              consumer.pause([{ topic, partitions: [batch.partition] }]);
              if (remaining.size === 0) finish();
            }
          },
        })
        .catch((error: unknown) => {
          clearInterval(watchdog);
          reject(error as Error);
        });
    });
    // Partitions outside the request stay paused; the rest start exactly at their first offset.
    const all = (await admin.fetchTopicOffsets(topic)).map((w) => w.partition);
    const others = all.filter((p) => !remaining.has(p));
    if (others.length > 0) consumer.pause([{ topic, partitions: others }]);
    for (const r of ranges) consumer.seek({ topic, partition: r.partition, offset: r.from.toString() });
    await done;
  } finally {
    await consumer.disconnect().catch(() => {});
    await admin.deleteGroups([groupId]).catch(() => {});
  }
  return { read };
}
