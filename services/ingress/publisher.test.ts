import type { Kafka } from '#plumbing/kafka/types.ts';
import { Registry } from 'prom-client';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createIngressMetrics } from './metrics.ts';
import { BatchingPublisher, PublishError } from './publisher.ts';

// A broker that answers metadata for topic t (one partition) and handles produce requests with `send`.
function fakeBroker(send: (request: { messages: unknown[] }) => Promise<unknown>): Kafka {
  const admin = {
    connect: async () => {},
    disconnect: async () => {},
    fetchTopicMetadata: async () => ({ topics: [{ name: 't', partitions: [{ partitionId: 0, leader: 1 }] }] }),
  };
  const producer = { connect: async () => {}, disconnect: async () => {}, send };
  return { admin: () => admin, producer: () => producer } as unknown as Kafka;
}

// A broker that never acknowledges a produce request.
const silentBroker = (): Kafka => fakeBroker(() => new Promise(() => {}));

function publisherOn(kafka: Kafka, options: { ackTimeoutMs: number; maxBatchRecords: number }): BatchingPublisher {
  return new BatchingPublisher({
    kafka,
    topic: 't',
    logger: pino({ level: 'silent' }),
    metrics: createIngressMetrics(new Registry()),
    maxBatchBytes: 1024 * 1024,
    lingerMs: 0,
    probeIntervalMs: 60_000,
    ...options,
  });
}

describe('BatchingPublisher ack deadlines', () => {
  it('answers ack_timeout to every waiting request, in flight or queued, after ackTimeoutMs', async () => {
    const publisher = publisherOn(silentBroker(), { ackTimeoutMs: 150, maxBatchRecords: 2 });
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
    // Liveness only, 20x the deadline: the answers come from the deadline's timer, not from a
    // later one (a slow machine delays a timer, it does not multiply it).
    expect(elapsed).toBeLessThan(150 * 20);
    await publisher.close();
  }, 10_000);
});

// A broker that holds each produce request until the test acknowledges it, recording each request's size.
function heldBroker(): { kafka: Kafka; sends: number[]; sent: (count: number) => Promise<void>; ack: (index: number) => void } {
  const sends: number[] = [];
  const acks: Array<() => void> = [];
  const waiting: Array<{ count: number; resolve: () => void }> = [];
  const kafka = fakeBroker(({ messages }) => {
    sends.push(messages.length);
    const acked = new Promise<unknown>((resolve) => acks.push(() => resolve([])));
    for (const w of waiting.filter((w) => sends.length >= w.count)) w.resolve();
    return acked;
  });
  /** Resolves once `count` produce requests have reached the broker. */
  const sent = (count: number) => new Promise<void>((resolve) => (sends.length >= count ? resolve() : waiting.push({ count, resolve })));
  return { kafka, sends, sent, ack: (index) => acks[index]!() };
}

describe('BatchingPublisher batching with PUBLISH_LINGER_MS=0', () => {
  it('sends the requests of one turn together, and what arrives during a send in the next batch', async () => {
    const broker = heldBroker();
    const publisher = publisherOn(broker.kafka, { ackTimeoutMs: 5_000, maxBatchRecords: 100 });
    await publisher.start();
    const record = { key: 'k', value: Buffer.from('{}'), headers: {} };
    const first = [1, 2, 3].map(() => publisher.publish(record));
    await broker.sent(1);
    // The first batch is in flight (not acknowledged yet): these two wait and go out together next.
    const second = [1, 2].map(() => publisher.publish(record));
    await new Promise((resolve) => setImmediate(resolve));
    expect(broker.sends).toEqual([3]);
    broker.ack(0);
    await broker.sent(2);
    broker.ack(1);
    await Promise.all([...first, ...second]);
    expect(broker.sends).toEqual([3, 2]);
    await publisher.close();
  });
});
