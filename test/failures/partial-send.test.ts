import { afterAll, describe, expect, it } from 'vitest';
import type { Producer } from '#plumbing/kafka/types.ts';
import { createIdempotentProducer } from '#plumbing/kafka/producers.ts';
import { LocalKafka } from '../kit/infra.ts';
import { readTopic, testKafka, useLocalKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { eventually } from '../kit/eventually.ts';
import { freePortRange } from '../kit/ports.ts';

const basePort = await freePortRange(4);

/**
 * One send() whose partitions the producer believes are on two brokers, after one of those
 * partitions has moved to the other broker: the first broker stores its part, the second refuses
 * (NOT_LEADER_OR_FOLLOWER), and the retry finds every partition on a broker that has already
 * answered. kafkajs 2.2.4 then resolved the send without writing the moved partition's records
 * (tulios/kafkajs#1303); a transaction committed them as written. Leadership moves like this after
 * every broker loss, and the cluster-faults test lost applied records to it.
 */
describe('failures: a send spanning a partition that just changed leader', () => {
  const cluster = new LocalKafka({ name: `partial-${process.pid}`, nodes: 2, basePort });
  useLocalKafka(cluster, { startTimeoutMs: 150_000, timeoutMs: 240_000 });
  const kafka = testKafka(uniqueName('partial'), cluster.brokers);
  const producers: Producer[] = [];

  afterAll(async () => {
    await Promise.all(producers.map((p) => p.disconnect().catch(() => {})));
  });

  /** A topic of two partitions: 0 led by broker 1, 1 led by broker 2. */
  async function twoLeaderTopic(): Promise<string> {
    const topic = uniqueName('partial');
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: [
          {
            topic,
            replicaAssignment: [
              { partition: 0, replicas: [1, 2] },
              { partition: 1, replicas: [2, 1] },
            ],
          },
        ],
      });
      await eventually(async () => (await leaders(topic)).join() === '1,2', { timeoutMs: 30_000, message: 'leaders 1 and 2' });
    } finally {
      await admin.disconnect();
    }
    return topic;
  }

  async function leaders(topic: string): Promise<number[]> {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      return topics[0]!.partitions.sort((a, b) => a.partitionId - b.partitionId).map((p) => p.leader);
    } finally {
      await admin.disconnect();
    }
  }

  /** Moves partition 1 to broker 1 alone; the producer's metadata still names broker 2. */
  async function moveSecondPartition(topic: string): Promise<void> {
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 1, replicas: [1] }] }] });
    } finally {
      await admin.disconnect();
    }
    await eventually(async () => (await leaders(topic)).join() === '1,1', { timeoutMs: 30_000, message: 'partition 1 led by broker 1' });
  }

  function messages(round: string) {
    return [0, 1].map((partition) => ({ partition, key: `k${partition}`, value: `${round}-p${partition}` }));
  }

  async function values(topic: string): Promise<string[]> {
    return (await readTopic(kafka, topic)).map((r) => r.value.toString()).sort();
  }

  it('an idempotent producer writes every record a resolved send() covered', async () => {
    const topic = await twoLeaderTopic();
    const producer = createIdempotentProducer(kafka);
    producers.push(producer);
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: messages('before') });
    await moveSecondPartition(topic);
    await producer.send({ topic, acks: -1, messages: messages('after') });
    expect(await values(topic)).toEqual(['after-p0', 'after-p1', 'before-p0', 'before-p1']);
  });

  it('a transaction commits every record its resolved sends covered', async () => {
    const topic = await twoLeaderTopic();
    const producer = createIdempotentProducer(kafka, { transactionalId: uniqueName('partial-tx') });
    producers.push(producer);
    await producer.connect();
    const first = await producer.transaction();
    await first.send({ topic, acks: -1, messages: messages('before') });
    await first.commit();
    await moveSecondPartition(topic);
    const second = await producer.transaction();
    await second.send({ topic, acks: -1, messages: messages('after') });
    await second.commit();
    expect(await values(topic)).toEqual(['after-p0', 'after-p1', 'before-p0', 'before-p1']);
  });
});
