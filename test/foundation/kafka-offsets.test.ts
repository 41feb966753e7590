import { describe, expect, it } from 'vitest';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import { testKafka, createTestTopics, useTestAdmin } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { ensureTopics, topicSpecs } from '#plumbing/kafka/topics.ts';
import { groupLag } from '#plumbing/kafka/lag.ts';

async function consumeN(kafka: Kafka, groupId: string, topic: string, n: number): Promise<string[]> {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10_000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${seen.length}/${n} records within 30 s`)), 30_000);
    consumer
      .run({
        autoCommit: false,
        eachMessage: async ({ message, partition }) => {
          seen.push(message.value!.toString());
          await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
          if (seen.length === n) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  return seen.sort();
}

describe('the real Kafka broker', () => {
  const kafka = testKafka();
  const admin = useTestAdmin(kafka);

  it('creates the topic set idempotently, with a compacted applied topic', async () => {
    const { settings, names } = await createTestTopics(kafka);
    const again = await ensureTopics(admin, topicSpecs(settings), 1);
    expect(again.created).toEqual([]);
    expect(again.existing).toHaveLength(2 + settings.retryLevels + 1);
    const metadata = await admin.fetchTopicMetadata({ topics: [names.events] });
    expect(metadata.topics[0]!.partitions).toHaveLength(3);
    const configs = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: 2, name: names.applied, configNames: ['cleanup.policy'] }],
    });
    expect(configs.resources[0]!.configEntries[0]!.configValue).toBe('compact');
  });

  it('a created topic set is usable by a new client as soon as ensureTopics returns (the broker publishes new topics to its metadata cache a little after CreateTopics answers)', async () => {
    // Several sets at once load the broker as a parallel test run or a fleet's first start does.
    const sets = await Promise.all(Array.from({ length: 6 }, () => createTestTopics(kafka)));
    await Promise.all(
      sets.map(async ({ names }) => {
        const fresh = testKafka();
        const consumer = fresh.consumer({ groupId: uniqueName('visible') });
        await consumer.connect();
        try {
          // subscribe reads the metadata once, without retrying an unknown topic.
          await consumer.subscribe({ topics: [names.events, names.applied, names.dlq, ...names.retries], fromBeginning: true });
        } finally {
          await consumer.disconnect();
        }
      }),
    );
  });

  it('answers watermarks, offsets by time and a lag right after the topics are created (metadata names a leader a moment before it leads)', async () => {
    // Many partitions at once widen the window in which the broker is named leader in the metadata
    // but answers "not the leader" to ListOffsets: what `bridge lag`, the console and readTopic meet.
    const sets = await Promise.all(Array.from({ length: 3 }, () => createTestTopics(kafka, { eventsPartitions: 24 })));
    await Promise.all(
      sets.map(async ({ names }) => {
        const ends = await admin.fetchTopicOffsets(names.events);
        expect(ends.map((e) => [e.low, e.high])).toEqual(Array.from({ length: 24 }, () => ['0', '0']));
        expect(await admin.fetchTopicOffsetsByTimestamp(names.events, Date.now())).toHaveLength(24);
        const lag = await groupLag(admin, uniqueName('nobody'), names.events);
        expect(lag.map((row) => row.lag)).toEqual(Array.from({ length: 24 }, () => 0));
      }),
    );
  });

  it('never auto-creates a topic on produce', async () => {
    const producer = kafka.producer({ allowAutoTopicCreation: true, retry: { retries: 1 } });
    await producer.connect();
    const ghost = uniqueName('ghost');
    await expect(producer.send({ topic: ghost, messages: [{ value: 'x' }] })).rejects.toThrow();
    await producer.disconnect();
    expect(await admin.listTopics()).not.toContain(ghost);
  });

  it('a group commits offsets, setOffsets rewinds it, and the records are read again', async () => {
    const { names } = await createTestTopics(kafka);
    const topic = names.events;
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
    await producer.connect();
    const values = Array.from({ length: 30 }, (_, i) => `record-${String(i).padStart(2, '0')}`);
    await producer.send({ topic, acks: -1, messages: values.map((v, i) => ({ key: `k${i % 7}`, value: v })) });
    await producer.disconnect();

    const groupId = uniqueName('group');
    expect(await consumeN(kafka, groupId, topic, 30)).toEqual(values);

    const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
    const total = committed[0]!.partitions.reduce((sum, p) => sum + Number(p.offset), 0);
    expect(total).toBe(30);

    // The group is empty now (its only member left), which setOffsets requires.
    const earliest = await admin.fetchTopicOffsets(topic);
    await admin.setOffsets({ groupId, topic, partitions: earliest.map((p) => ({ partition: p.partition, offset: p.low })) });
    expect(await consumeN(kafka, groupId, topic, 30)).toEqual(values);
  });
});
