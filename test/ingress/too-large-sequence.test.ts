import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kafka, Producer } from '#plumbing/kafka/types.ts';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { createIngressMetrics } from '#services/ingress/metrics.ts';
import { BatchingPublisher, PublishError } from '#services/ingress/publisher.ts';
import { readTopic, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { eventually, sleep } from '../kit/eventually.ts';

const ACK_TIMEOUT_MS = 2_000;
const LINGER_MS = 1_000;
/** How long after a send starts a refused send reports its failure: after the requests' deadline, before the batch timeout. */
const FAILURE_SEEN_AFTER_MS = 1_500;

/**
 * Regression (security review): after a batch refused as too large, the ingress kept its
 * idempotent producer. The broker had appended the batch's records for the other partitions of
 * the same request, but kafkajs rolls the sequence numbers of every partition of a failed request
 * back. The next record on such a partition went out with the sequence of a record already
 * written, the broker took it for a duplicate and acknowledged it without writing it: a 2xx for an
 * event that is not on the events topic.
 *
 * The refusal reaches the publisher late here (as over a slow link), after the requests' own
 * deadline: their callers already had their 503, and nothing is sent again on the old sequences
 * but the next request.
 */
describe('ingress publisher: the producer after a batch refused as too large', () => {
  let kafka: Kafka;
  let topic: string;
  let publisher: BatchingPublisher;

  beforeAll(async () => {
    const real = testKafka();
    topic = uniqueName('too-large-seq');
    const admin = real.admin();
    await admin.connect();
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: 2, replicationFactor: 1, configEntries: [{ name: 'max.message.bytes', value: '4096' }] }],
    });
    await admin.disconnect();
    // The real broker and client; only a failed send reports back later.
    const slowFailures = (producer: Producer): Producer => {
      const send = producer.send.bind(producer);
      producer.send = async (record) => {
        const started = Date.now();
        try {
          return await send(record);
        } catch (error) {
          await sleep(Math.max(0, started + FAILURE_SEEN_AFTER_MS - Date.now()));
          throw error;
        }
      };
      return producer;
    };
    kafka = new Proxy(real, {
      get: (target, prop) =>
        prop === 'producer'
          ? (...args: Parameters<Kafka['producer']>) => slowFailures(target.producer(...args))
          : Reflect.get(target, prop),
    });
    publisher = new BatchingPublisher({
      kafka,
      topic,
      logger: createLogger({ name: 'test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
      metrics: createIngressMetrics(new Registry()),
      ackTimeoutMs: ACK_TIMEOUT_MS,
      maxBatchRecords: 100,
      maxBatchBytes: 1024 * 1024,
      lingerMs: LINGER_MS,
      probeIntervalMs: 500,
    });
    await publisher.start();
    await eventually(() => publisher.available, { timeoutMs: 30_000, message: 'the publisher to see the broker' });
  });

  afterAll(async () => {
    await publisher?.close();
  });

  const outcome = (p: Promise<void>) =>
    p.then(
      () => 'acked',
      (error: unknown) => (error instanceof PublishError ? error.code : String(error)),
    );

  it('acknowledges a record only once it is on the topic', async () => {
    // Two keys on two partitions of the same broker: one request, one partition refused.
    const small = 'k-small';
    const large = ['k-large-0', 'k-large-1', 'k-large-2', 'k-large-3'].find((k) => partitionForKey(k, 2) !== partitionForKey(small, 2))!;
    const first = await Promise.all([
      outcome(publisher.publish({ key: small, value: Buffer.from('{"n":1}'), headers: { 'event-id': 'evt_first' } })),
      outcome(publisher.publish({ key: large, value: Buffer.from('x'.repeat(6000)), headers: { 'event-id': 'evt_large' } })),
    ]);
    // Both past their deadline before the refusal came back.
    expect(first).toEqual(['ack_timeout', 'ack_timeout']);
    // Let the refusal arrive and be handled.
    await sleep(FAILURE_SEEN_AFTER_MS);

    const next = await outcome(publisher.publish({ key: small, value: Buffer.from('{"n":2}'), headers: { 'event-id': 'evt_next' } }));
    const onTopic = (await readTopic(kafka, topic)).map((r) => r.headers['event-id']);
    if (next === 'acked') expect(onTopic, 'an acknowledged record is on the topic').toContain('evt_next');
    expect(next).toBe('acked');
  });
});
