import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { LocalKafka } from '../kit/infra.ts';
import type { SourceRecord } from '#domain/apply/index.ts';
import { resourceKey, sampleThemeEvent } from '#domain/contract/index.ts';
import { createFailureMetrics, permanentFailure } from '#domain/failures/index.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { createFailureProducer, RetryRouter } from '#services/worker/retry/retry-router.ts';
import { useTestDatabase } from '../kit/db.ts';
import { readTopic, testKafka, useLocalKafka, useTestTopics } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { sleep } from '../kit/eventually.ts';
import { freePortRange } from '../kit/ports.ts';

const basePort = await freePortRange(2);

/**
 * Regression: the failure producer (shared by the main and the retry consumers) was kept after a
 * send timed out. kafkajs gives up on the send and rolls its idempotent sequence number back,
 * although the broker appends the batch once it answers again; the next dead letter then goes out
 * with the same sequence number and the broker acknowledges it as a duplicate without writing it.
 * Its offset is committed: a DLQ record the router reported as written is not on the topic.
 */
describe('failure producer after a send that timed out', () => {
  const cluster = new LocalKafka({
    name: `producer-recovery-${process.pid}`,
    nodes: 1,
    basePort,
  });
  useLocalKafka(cluster, { startTimeoutMs: 120_000, timeoutMs: 180_000 });
  const kafka = testKafka(uniqueName('recovery'), cluster.brokers);
  const { names } = useTestTopics(kafka, { eventsPartitions: 1, retryLevels: 1 });
  const db = useTestDatabase();

  it('writes every dead letter it reports as written, and keeps working after the broker comes back', async () => {
    // A client that gives up quickly, so the test need not wait out kafkajs's default retries.
    const client = createKafka({
      brokers: cluster.brokers,
      clientId: uniqueName('router'),
      logger: createLogger({ name: 'router', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
      requestTimeoutMs: 1_000,
      retries: 1,
    });
    const producer = createFailureProducer(client, createLogger({ name: 'router', level: process.env.TEST_LOG_LEVEL ?? 'silent' }));
    await producer.connect();
    const router = new RetryRouter({
      producer,
      pool: db.pool,
      names,
      schedule: { delaysMs: [1000], jitter: 0 },
      produceTimeoutMs: 1_500,
      metrics: createFailureMetrics(new Registry()),
      logger: createLogger({ name: 'router', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
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
    const deadLetter = (r: SourceRecord) => router.route(r, permanentFailure('invalid_data', 'poison for the test'));

    expect((await deadLetter(record())).outcome).toBe('dead_lettered');

    cluster.pauseNode(1);
    try {
      await expect(deadLetter(record())).rejects.toThrow();
      // kafkajs gives up on the frozen broker (its request timeout and retries), rolling its sequence back.
      await sleep(6_000);
    } finally {
      cluster.resumeNode(1);
    }
    // The frozen broker now processes what it had buffered (the timed-out batch is appended).
    await sleep(2_000);

    const reported: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const r = record();
      let outcome: string;
      try {
        outcome = (await deadLetter(r)).outcome;
      } catch {
        // A refusal is fine once (the router's caller keeps the offset and retries); silence is not.
        outcome = (await deadLetter(r).catch((e: Error) => ({ outcome: `failed: ${e.message}` }))).outcome;
      }
      expect(outcome).toBe('dead_lettered');
      reported.push(r.value!.toString('utf8'));
    }
    await producer.close();
    // The router replaced its producer after the timed-out send.
    expect(producer.replacements).toBeGreaterThanOrEqual(1);

    const onTopic = new Set((await readTopic(kafka, names.dlq)).map((r) => r.value.toString('utf8')));
    expect(reported.filter((body) => !onTopic.has(body))).toEqual([]);
  });
});
