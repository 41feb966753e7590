import type { Kafka } from 'kafkajs';
import { Registry } from 'prom-client';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createIngressMetrics } from './metrics.ts';
import { BatchingPublisher, PublishError } from './publisher.ts';

// A broker that answers metadata but never acknowledges a produce request.
function silentBroker(): Kafka {
  const admin = {
    connect: async () => {},
    disconnect: async () => {},
    fetchTopicMetadata: async () => ({ topics: [{ name: 't', partitions: [{ partitionId: 0, leader: 1 }] }] }),
  };
  const producer = { connect: async () => {}, disconnect: async () => {}, send: () => new Promise(() => {}) };
  return { admin: () => admin, producer: () => producer } as unknown as Kafka;
}

describe('BatchingPublisher ack deadlines', () => {
  it('answers ack_timeout to every waiting request, in flight or queued, after ackTimeoutMs', async () => {
    const publisher = new BatchingPublisher({
      kafka: silentBroker(),
      topic: 't',
      logger: pino({ level: 'silent' }),
      metrics: createIngressMetrics(new Registry()),
      ackTimeoutMs: 150,
      maxBatchRecords: 2,
      maxBatchBytes: 1024 * 1024,
      lingerMs: 0,
      probeIntervalMs: 60_000,
    });
    await publisher.start();
    const started = performance.now();
    const record = { key: 'k', value: Buffer.from('{}'), headers: {} };
    // Two go out in the first batch; the third waits in the queue behind it.
    const outcomes = await Promise.all(
      [1, 2, 3].map(() =>
        publisher.publish(record).then(
          () => 'acked',
          (error: unknown) => error,
        ),
      ),
    );
    const elapsed = performance.now() - started;
    for (const outcome of outcomes) expect(outcome).toBeInstanceOf(PublishError);
    // The batch in flight times out. The queued request times out too, or, when the process was
    // descheduled between the publishes so its own deadline is a moment later, it is answered
    // broker_unavailable as the timed-out batch marks the producer down: a 503 either way.
    const codes = outcomes.map((o) => (o as PublishError).code);
    expect(codes.slice(0, 2)).toEqual(['ack_timeout', 'ack_timeout']);
    expect(['ack_timeout', 'broker_unavailable']).toContain(codes[2]);
    expect(elapsed).toBeGreaterThanOrEqual(145);
    expect(elapsed).toBeLessThan(1000);
    await publisher.close();
  });
});
