import { inject } from 'vitest';
import type { EachBatchPayload, Kafka } from 'kafkajs';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { ensureTopics, topicNames, topicSpecs, type TopicNames, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { uniqueName } from './names.ts';

export function testBrokers(): string[] {
  return parseBrokers(inject('kafkaBrokers'));
}

export function testKafka(clientId = uniqueName('test'), brokers = testBrokers()): Kafka {
  return createKafka({ brokers, clientId, logger: createLogger({ name: 'test', level: process.env.TEST_LOG_LEVEL ?? 'error' }) });
}

/** A full, uniquely named topic set (events, retries, dlq, applied) created on the test broker. */
export async function createTestTopics(
  kafka: Kafka,
  overrides: Partial<TopicSettings> = {},
): Promise<{ settings: TopicSettings; names: TopicNames }> {
  const base = uniqueName('t');
  const settings: TopicSettings = {
    events: `${base}.events`,
    applied: `${base}.applied`,
    eventsPartitions: 3,
    retryLevels: 4,
    replicationFactor: 1,
    minInsyncReplicas: 1,
    ...overrides,
  };
  const admin = kafka.admin();
  await admin.connect();
  try {
    await ensureTopics(admin, topicSpecs(settings), settings.replicationFactor);
  } finally {
    await admin.disconnect();
  }
  return { settings, names: topicNames(settings) };
}

/**
 * Records on the topic: the sum of end minus start offsets. Only for topics written without
 * transactions (the events topic, retries, DLQ); on the applied topic commit markers take offsets too.
 */
export async function topicRecordCount(kafka: Kafka, topic: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
  } finally {
    await admin.disconnect();
  }
}

export interface ReadRecord {
  partition: number;
  offset: string;
  key: string;
  value: Buffer;
  headers: Record<string, string>;
}

/**
 * Reads every committed record of a topic up to the current high watermarks, sorted by partition
 * and offset. A partition is done once the consumer's position reaches its watermark: on a
 * transactional topic (the applied topic) the last offsets may be commit markers, which a consumer
 * never sees as records, and aborted records are skipped (kafkajs reads committed by default).
 */
export async function readTopic(kafka: Kafka, topic: string, timeoutMs = 60_000): Promise<ReadRecord[]> {
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  const target = new Map(ends.filter((e) => Number(e.high) > Number(e.low)).map((e) => [e.partition, Number(e.high)]));
  const out: ReadRecord[] = [];
  if (target.size === 0) return out;
  const pending = new Set(target.keys());
  const consumer = kafka.consumer({ groupId: uniqueName('reader'), maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const done = new Promise<void>((resolve, reject) => {
    consumer
      .run({
        autoCommit: false,
        eachBatch: async ({ batch }: EachBatchPayload) => {
          const end = target.get(batch.partition) ?? 0;
          for (const message of batch.messages) {
            if (Number(message.offset) >= end) break;
            out.push({
              partition: batch.partition,
              offset: message.offset,
              key: message.key?.toString() ?? '',
              value: message.value ?? Buffer.alloc(0),
              headers: Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)])),
            });
          }
        },
      })
      .catch(reject);
    // Also fired for batches of only markers or aborted records, which never reach eachBatch;
    // lastOffset counts those too.
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      if (Number(payload.lastOffset) + 1 >= (target.get(payload.partition) ?? 0)) pending.delete(payload.partition);
      if (pending.size === 0) resolve();
    });
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      done,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`read ${out.length} records of ${topic}; partitions ${[...pending].join(',')} not read to their end`)),
          timeoutMs,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
    await consumer.disconnect();
  }
  out.sort((a, b) => a.partition - b.partition || Number(a.offset) - Number(b.offset));
  return out;
}
