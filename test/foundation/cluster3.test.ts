import { describe, expect, it } from 'vitest';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import { LocalKafka, threeNodeDefaults } from '../../infra/provision/kafka/local-kafka.ts';
import { testKafka, useLocalKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { sleep } from '../kit/eventually.ts';
import { freePortRange } from '../kit/ports.ts';

const basePort = await freePortRange(6);

// The three-broker variant (replication 3, min.insync.replicas 2) the failover tests build on.
describe('three-broker local cluster', () => {
  const cluster = new LocalKafka({ ...threeNodeDefaults, name: `cluster3-${process.pid}`, basePort });
  useLocalKafka(cluster, { startTimeoutMs: 120_000, timeoutMs: 180_000 });
  const kafka = testKafka(uniqueName('c3'), cluster.brokers);

  it('produces with acks=all and consumes on a topic replicated three ways', async () => {
    const admin = kafka.admin();
    await admin.connect();
    const topic = uniqueName('replicated');
    // On a loaded machine the new topic's metadata may answer "does not host this topic-partition"
    // past createTopics's own wait for leaders: a retry finds the topic created and waits again.
    for (let attempt = 1; ; attempt += 1) {
      try {
        await admin.createTopics({
          waitForLeaders: true,
          topics: [{ topic, numPartitions: 3, replicationFactor: 3, configEntries: [{ name: 'min.insync.replicas', value: '2' }] }],
        });
        break;
      } catch (error) {
        if (attempt >= 5 || (error as { type?: string }).type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw error;
        await sleep(500 * attempt);
      }
    }
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    for (const p of metadata.topics[0]!.partitions) expect(p.replicas).toHaveLength(3);

    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
    await producer.connect();
    // A just-created topic reaches each broker's metadata a moment apart; on a loaded machine a
    // leader has answered "does not host this topic-partition" for longer than kafkajs's own
    // retries. Retry such (retriable) answers a while; any other error fails the test.
    const messages = Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `v${i}` }));
    for (let attempt = 1; ; attempt += 1) {
      try {
        await producer.send({ topic, acks: -1, messages });
        break;
      } catch (error) {
        const e = error as { retriable?: boolean; name?: string; cause?: { retriable?: boolean } };
        const retriable = e.retriable === true || e.cause?.retriable === true || e.name === 'KafkaJSNumberOfRetriesExceeded';
        if (!retriable || attempt >= 30) throw error;
        await sleep(1000);
      }
    }
    await producer.disconnect();

    const consumer = kafka.consumer({ groupId: uniqueName('c3-group') });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const seen = new Set<string>();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`saw ${seen.size}/20`)), 60_000);
      consumer
        .run({
          eachMessage: async ({ message }) => {
            seen.add(message.value!.toString());
            if (seen.size === 20) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
    await consumer.disconnect();
    await admin.disconnect();
    expect(seen.size).toBe(20);
  });
});
