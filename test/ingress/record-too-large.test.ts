import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '#plumbing/logging/logger.ts';
import { createIngressMetrics } from '#services/ingress/metrics.ts';
import { BatchingPublisher, PublishError } from '#services/ingress/publisher.ts';
import { readTopic, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { eventually } from '../kit/eventually.ts';

/**
 * Regression: the broker refuses a record batch over the topic's max.message.bytes as a whole, and
 * the ingress answered 413 to every request of that batch, though only one of them was too large:
 * the others were fine, and a provider that sees 413 does not retry. Now the batch is sent again
 * one record at a time, so only the record that is too large by itself gets record_too_large.
 */
describe('ingress publisher: one record too large for the topic in a batch of good ones', () => {
  const kafka = testKafka();
  let topic: string;
  let publisher: BatchingPublisher;

  beforeAll(async () => {
    topic = uniqueName('too-large');
    const admin = kafka.admin();
    await admin.connect();
    // One partition: the whole batch is one record batch, refused as a whole, so nothing of the
    // first attempt is on the topic and each good record must be there exactly once.
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'max.message.bytes', value: '4096' }] }],
    });
    await admin.disconnect();
    publisher = new BatchingPublisher({
      kafka,
      topic,
      logger: createLogger({ name: 'test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
      metrics: createIngressMetrics(new Registry()),
      ackTimeoutMs: 15_000,
      maxBatchRecords: 100,
      maxBatchBytes: 1024 * 1024,
      // Long enough for all the publishes below to share one batch.
      lingerMs: 50,
      probeIntervalMs: 1_000,
    });
    await publisher.start();
    await eventually(() => publisher.available, { timeoutMs: 30_000, message: 'the publisher to see the broker' });
  });

  afterAll(async () => {
    await publisher?.close();
  });

  it('answers record_too_large to that record only, and publishes the others once, in order', async () => {
    const records = [0, 1, 2, 3, 4].map((i) => ({
      key: `k${i}`,
      value: Buffer.from(i === 2 ? 'x'.repeat(6000) : JSON.stringify({ i })),
      headers: { 'event-id': `evt_${i}` },
    }));
    const outcomes = await Promise.all(
      records.map((r) =>
        publisher.publish(r).then(
          () => 'acked',
          (error: unknown) => (error instanceof PublishError ? error.code : String(error)),
        ),
      ),
    );
    expect(outcomes).toEqual(['acked', 'acked', 'record_too_large', 'acked', 'acked']);
    const onTopic = await readTopic(kafka, topic);
    expect(onTopic.map((r) => r.key)).toEqual(['k0', 'k1', 'k3', 'k4']);
  });
});
