// Kafka for tests: a client on the test broker, uniquely named topic sets (useTestTopics for a
// suite's), and reading a topic to its committed end.
import { afterAll, beforeAll, inject } from 'vitest';
import type { Admin, Consumer, EachBatchPayload, Kafka } from '#plumbing/kafka/types.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { ensureTopics, topicNames, topicSpecs, type TopicNames, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { uniqueName } from './names.ts';
import { sleep } from './eventually.ts';
import { suiteFixture, type FixtureOptions } from './fixture.ts';
import type { LocalKafka } from './infra.ts';

export function testBrokers(): string[] {
  return parseBrokers(inject('kafkaBrokers'));
}

export function testKafka(clientId = uniqueName('test'), brokers = testBrokers()): Kafka {
  return createKafka({ brokers, clientId, logger: createLogger({ name: 'test', level: process.env.TEST_LOG_LEVEL ?? 'error' }) });
}

export interface TestTopics {
  settings: TopicSettings;
  names: TopicNames;
}

/** A full topic set's settings under a unique name (events, retries, dlq, applied), not yet created. */
export function testTopicSettings(overrides: Partial<TopicSettings> = {}): TestTopics {
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
  return { settings, names: topicNames(settings) };
}

/**
 * Creates the topic set on the broker. Right after creation a loaded broker can answer a metadata
 * request with UNKNOWN_TOPIC_OR_PARTITION, which kafkajs's createTopics(waitForLeaders) does not
 * retry: a retry, under the same names, finds the topics created and only waits for them.
 */
async function ensureTestTopics(kafka: Kafka, settings: TopicSettings): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    const admin = kafka.admin();
    await admin.connect();
    try {
      await ensureTopics(admin, topicSpecs(settings), settings.replicationFactor);
      return;
    } catch (error) {
      if (attempt >= 4 || (error as { type?: string }).type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw error;
    } finally {
      await admin.disconnect();
    }
    await sleep(250 * attempt);
  }
}

/** A full, uniquely named topic set created on the test broker (as testTopicSettings names it). */
export async function createTestTopics(kafka: Kafka, overrides: Partial<TopicSettings> = {}): Promise<TestTopics> {
  const topics = testTopicSettings(overrides);
  await ensureTestTopics(kafka, topics.settings);
  return topics;
}

/**
 * A topic set for the suite, created before its first test (topics are never deleted: their names
 * are unique). Named at once, so the names can be read while the suite is collected.
 */
export function useTestTopics(kafka: Kafka, overrides: Partial<TopicSettings> = {}, { timeoutMs }: FixtureOptions = {}): TestTopics {
  const topics = testTopicSettings(overrides);
  beforeAll(() => ensureTestTopics(kafka, topics.settings), timeoutMs);
  return topics;
}

/**
 * Brokers of the suite's own (a test that stops and starts them): wiped and started before its
 * first test, stopped and wiped after its last. Call it before the fixtures that use the brokers.
 */
export function useLocalKafka(
  cluster: LocalKafka,
  { startTimeoutMs, timeoutMs }: { startTimeoutMs?: number } & FixtureOptions = {},
): LocalKafka {
  beforeAll(async () => {
    cluster.wipe();
    await cluster.start(startTimeoutMs);
  }, timeoutMs);
  afterAll(async () => {
    await cluster.stop();
    cluster.wipe();
  });
  return cluster;
}

/** An admin client for the suite: connected before its first test, disconnected after its last. */
export function useTestAdmin(kafka: Kafka): Admin {
  return suiteFixture(
    async () => {
      const admin = kafka.admin();
      await admin.connect();
      return admin;
    },
    (admin) => admin.disconnect(),
  );
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

/** How long the last stable offsets must stay put before readTopic trusts them as the end. */
const STABLE_FOR_MS = 250;

/**
 * Reads every committed record of a topic up to its current end, sorted by partition and offset.
 *
 * The end is the last stable offset (kafkajs's admin lists offsets read_committed): on the
 * transactional applied topic it stays below a transaction whose commit has returned until the
 * broker has written that transaction's markers, which it does a little later. A test that saw the
 * outbox drained and read at once could miss the last batch (version-property did, under load). So
 * the end is read again after the consumer reached it, and reading goes on until it stays put for
 * STABLE_FOR_MS. A partition is done once the consumer's position reaches its end: the last offsets
 * may be commit markers, which a consumer never sees as records, and aborted records are skipped.
 */
export async function readTopic(kafka: Kafka, topic: string, timeoutMs = 60_000): Promise<ReadRecord[]> {
  const deadline = performance.now() + timeoutMs;
  const admin = kafka.admin();
  await admin.connect();
  const ends = async () =>
    new Map((await admin.fetchTopicOffsets(topic)).map((e) => [e.partition, { low: Number(e.low), high: Number(e.high) }]));
  // By partition and offset: a consumer kafkajs restarts after an error reads from the start again.
  const out = new Map<string, ReadRecord>();
  // The next offset the reader will see, per partition (END_BATCH_PROCESS counts markers and aborted records too).
  const reached = new Map<number, number>();
  let consumer: Consumer | undefined;
  let failure: unknown;
  const startReader = async () => {
    consumer = kafka.consumer({ groupId: uniqueName('reader'), maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      reached.set(payload.partition, Math.max(reached.get(payload.partition) ?? 0, Number(payload.lastOffset) + 1));
    });
    consumer
      .run({
        autoCommit: false,
        eachBatch: async ({ batch }: EachBatchPayload) => {
          for (const message of batch.messages) {
            out.set(`${batch.partition}:${message.offset}`, {
              partition: batch.partition,
              offset: message.offset,
              key: message.key?.toString() ?? '',
              value: message.value ?? Buffer.alloc(0),
              headers: Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)])),
            });
          }
        },
      })
      .catch((error: unknown) => (failure = error));
  };
  try {
    let target = await ends();
    const behind = () => [...target].filter(([p, { low, high }]) => high > low && (reached.get(p) ?? low) < high).map(([p]) => p);
    for (;;) {
      while (behind().length > 0) {
        if (failure !== undefined) throw failure;
        if (performance.now() > deadline) {
          throw new Error(`read ${out.size} records of ${topic}; partitions ${behind().join(',')} not read to their end`);
        }
        if (consumer === undefined) await startReader();
        await sleep(20);
      }
      await sleep(STABLE_FOR_MS);
      const again = await ends();
      if ([...again].every(([p, { high }]) => target.get(p)?.high === high)) break;
      target = again;
    }
    const end = (partition: number) => target.get(partition)?.high ?? 0;
    return [...out.values()]
      .filter((r) => Number(r.offset) < end(r.partition))
      .sort((a, b) => a.partition - b.partition || Number(a.offset) - Number(b.offset));
  } finally {
    await consumer?.disconnect();
    await admin.disconnect();
  }
}
