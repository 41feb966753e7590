import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import type { Kafka } from '#plumbing/kafka/types.ts';
import type { SourceRecord } from '#domain/apply/index.ts';
import { resourceKey, sampleThemeEvent } from '#domain/contract/index.ts';
import { createFailureMetrics, permanentFailure } from '#domain/failures/index.ts';
import { createEventsPublisher } from '#domain/reconcile/publisher.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createRecoveringProducer } from '#plumbing/kafka/producers.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { createIngressMetrics } from '#services/ingress/metrics.ts';
import { BatchingPublisher } from '#services/ingress/publisher.ts';
import { createFailureProducer, RetryRouter } from '#services/worker/retry/retry-router.ts';
import { useTestDatabase } from '../kit/db.ts';
import { createTestTopics, readTopic, testBrokers, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { ProduceHoldProxy } from './produce-hold-proxy.ts';

// The client's request timeout: a Produce answer held longer than this times the request out in
// kafkajs while the broker has already appended its records.
const REQUEST_TIMEOUT_MS = 1_500;
const HOLD_MS = 3 * REQUEST_TIMEOUT_MS;
// What each send may take in all (kafkajs retries the timed-out request meanwhile).
const SEND_BOUND_MS = 30_000;

const logger = () => createLogger({ name: 'racing-sends', level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/**
 * Regression: two sends racing on one idempotent producer. kafkajs assigns a partition's sequence
 * number under a per-broker lock, and rolls it back when the request fails, request timeout
 * included (producer/sendMessages.js, the catch around broker.produce), although the broker may
 * already have appended the batch. The lock is released before the timed-out send retries, so a
 * second send waiting for it takes the rolled-back sequence number; the broker answers that batch
 * as a duplicate of the first (same producer id, same sequence range) with the first one's offset
 * and never writes it. The first send's retry then writes its own records a second time.
 *
 * Each case holds the broker's answer to the first Produce request past the client's request
 * timeout (the broker appends it), starts a second send on the same path while the first waits,
 * and then reads the topic back: every send reported as acknowledged must have its record there.
 */
describe('two sends racing on one producer', () => {
  const proxy = new ProduceHoldProxy(brokerAddress(testBrokers()));
  let direct: Kafka;
  let viaProxy: Kafka;
  let names: TopicNames;
  const db = useTestDatabase();

  beforeAll(async () => {
    await proxy.listen();
    direct = testKafka(uniqueName('racing-read'));
    // The bridge's own client settings (its retries included), reaching the broker through the proxy.
    viaProxy = createKafka({
      brokers: testBrokers(),
      clientId: uniqueName('racing'),
      logger: logger(),
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      socketFactory: proxy.socketFactory(),
    });
    // One partition per topic: both sends of a case land on the same partition, as two dead
    // letters (or two snapshots) of one partition's producer sequence do.
    names = (await createTestTopics(direct, { eventsPartitions: 1, retryLevels: 1 })).names;
  }, 120_000);

  afterAll(async () => {
    await proxy.close();
  });

  /**
   * Starts `first`, waits until its Produce request reached the broker with the answer held, then
   * starts `second`; returns which of them were acknowledged.
   */
  async function race(first: () => Promise<unknown>, second: () => Promise<unknown>): Promise<PromiseSettledResult<unknown>[]> {
    const held = proxy.nextHeld();
    proxy.holdProduceAnswers(1, HOLD_MS);
    const one = first();
    await held;
    const two = second();
    return Promise.allSettled([one, two]);
  }

  /** The values of acknowledged sends that are not on the topic. */
  async function acknowledgedButMissing(topic: string, sent: Array<{ value: string; settled: PromiseSettledResult<unknown> }>) {
    const onTopic = (await readTopic(direct, topic)).map((r) => r.value.toString('utf8'));
    const acknowledged = sent.filter((s) => s.settled.status === 'fulfilled').map((s) => s.value);
    return { acknowledged, onTopic, missing: acknowledged.filter((v) => !onTopic.includes(v)) };
  }

  it('the recovering producer: both acknowledged sends are on the topic', async () => {
    const producer = createRecoveringProducer(viaProxy, { name: 'racing', logger: logger(), connectTimeoutMs: 10_000 });
    await producer.connect();
    const topic = names.retries[0]!;
    const send = (value: string) => () =>
      producer.use(
        (p) => p.send({ topic, acks: -1, messages: [{ key: 'k', value }] }),
        SEND_BOUND_MS,
        'failure_produce_timeout',
        'racing send',
      );
    try {
      const [a, b] = await race(send('first'), send('second'));
      const outcome = await acknowledgedButMissing(topic, [
        { value: 'first', settled: a! },
        { value: 'second', settled: b! },
      ]);
      expect(outcome.acknowledged.length, 'a send was refused, not lost').toBeGreaterThan(0);
      expect(
        outcome.missing,
        `acknowledged ${JSON.stringify(outcome.acknowledged)}, on the topic ${JSON.stringify(outcome.onTopic)}`,
      ).toEqual([]);
    } finally {
      await producer.close();
    }
  }, 120_000);

  it('the failures producer: every dead letter reported as written is on the DLQ', async () => {
    const producer = createFailureProducer(viaProxy, logger());
    await producer.connect();
    const router = new RetryRouter({
      producer,
      pool: db.pool,
      names,
      schedule: { delaysMs: [1000], jitter: 0 },
      produceTimeoutMs: SEND_BOUND_MS,
      metrics: createFailureMetrics(new Registry()),
      logger: logger(),
    });
    let offset = 0;
    const record = (): SourceRecord => {
      const event = sampleThemeEvent({ resource: { id: uniqueName('thm'), version: 1 } });
      offset += 1;
      return {
        topic: names.events,
        partition: 0,
        offset: String(offset),
        key: resourceKey(event),
        value: Buffer.from(JSON.stringify(event)),
        headers: {},
      };
    };
    // As the main consumer and a retry consumer do, each dead-lettering a poison record at once.
    const [r1, r2] = [record(), record()];
    const deadLetter = (r: SourceRecord) => async () => {
      const outcome = await router.route(r, permanentFailure('invalid_data', 'poison for the test'));
      if (outcome.outcome !== 'dead_lettered') throw new Error(`routed as ${outcome.outcome}`);
    };
    try {
      const [a, b] = await race(deadLetter(r1), deadLetter(r2));
      const outcome = await acknowledgedButMissing(names.dlq, [
        { value: r1.value!.toString('utf8'), settled: a! },
        { value: r2.value!.toString('utf8'), settled: b! },
      ]);
      expect(outcome.acknowledged.length, 'a dead letter was refused, not lost').toBeGreaterThan(0);
      expect(outcome.missing.length, `${outcome.onTopic.length} record(s) on the DLQ`).toBe(0);
    } finally {
      await producer.close();
    }
  }, 120_000);

  it('the reconcile publisher: every snapshot reported as published is on the events topic', async () => {
    // A topic of its own (the applied one of this set, unused here): the events topic is the ingress case's.
    const topic = names.applied;
    const publisher = createEventsPublisher(viaProxy, { topic, logger: logger(), timeoutMs: SEND_BOUND_MS });
    // Two pulls finishing at once (RECONCILE_CONCURRENCY is 2).
    const publish = (value: string) => () => publisher.publish({ key: `tenant/theme/${value}`, value: Buffer.from(value), headers: {} });
    try {
      const [a, b] = await race(publish('snapshot-1'), publish('snapshot-2'));
      const outcome = await acknowledgedButMissing(topic, [
        { value: 'snapshot-1', settled: a! },
        { value: 'snapshot-2', settled: b! },
      ]);
      expect(outcome.acknowledged.length, 'a snapshot was refused, not lost').toBeGreaterThan(0);
      expect(
        outcome.missing,
        `acknowledged ${JSON.stringify(outcome.acknowledged)}, on the topic ${JSON.stringify(outcome.onTopic)}`,
      ).toEqual([]);
    } finally {
      await publisher.close();
    }
  }, 120_000);

  it('the ingress publisher keeps one batch in flight: every acknowledged request is on the topic', async () => {
    const topic = names.events;
    const publisher = new BatchingPublisher({
      kafka: viaProxy,
      topic,
      logger: logger(),
      metrics: createIngressMetrics(new Registry()),
      ackTimeoutMs: SEND_BOUND_MS,
      maxBatchRecords: 100,
      maxBatchBytes: 1024 * 1024,
      lingerMs: 0,
      probeIntervalMs: 1_000,
    });
    await publisher.start();
    const values = Array.from({ length: 6 }, (_, i) => `request-${i}`);
    const publish = (value: string) => publisher.publish({ key: `tenant/theme/${value}`, value: Buffer.from(value), headers: {} });
    try {
      // The first request's batch is held; the others arrive while it waits and go out together after it.
      const [first, rest] = await race(
        () => publish(values[0]!),
        () => Promise.all(values.slice(1).map(publish)),
      );
      const outcome = await acknowledgedButMissing(topic, [
        { value: values[0]!, settled: first! },
        ...values.slice(1).map((value) => ({ value, settled: rest! })),
      ]);
      expect(outcome.acknowledged).toEqual(values);
      expect(outcome.missing).toEqual([]);
    } finally {
      await publisher.close();
    }
  }, 120_000);
});

function brokerAddress(brokers: string[]): { host: string; port: number } {
  // The proxy stands for the test broker; a cluster of several would need one proxy per broker.
  if (brokers.length !== 1) throw new Error(`racing-sends expects one test broker, got ${brokers.join(',')}`);
  const [host, port] = brokers[0]!.split(':');
  return { host: host!, port: Number(port) };
}
