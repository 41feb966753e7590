import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { startWorker, type WorkerHandle } from '#services/worker/worker.ts';
import { defaultFailureSettings } from '#domain/failures/index.ts';
import { ensureTopics, topicSpecs, type TopicNames, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { createTestDatabase, type TestDatabase } from '../kit/db.ts';
import { createTestTopics, testBrokers, testKafka, readTopic } from '../kit/kafka.ts';
import { groupCaughtUp, produce, raw, stateOf, themeEvent, workerTestConfig } from '../kit/worker.ts';
import { eventually, sleep } from '../kit/eventually.ts';

const T = 'tenant_dlq_down';

// Regression: a record whose DLQ produce fails must not have its offset committed (it would be lost).
describe('failures: producing to the DLQ fails', () => {
  let db: TestDatabase;
  let kafka: Kafka;
  let worker: WorkerHandle;
  let names: TopicNames;
  let settings: TopicSettings;
  let groupId: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    kafka = testKafka();
    ({ names, settings } = await createTestTopics(kafka, { eventsPartitions: 1 }));
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [names.dlq] });
    await admin.disconnect();
    const config = workerTestConfig({
      brokers: testBrokers(),
      databaseUrl: db.url,
      eventsTopic: names.events,
      appliedTopic: names.applied,
      overrides: { retryLevels: names.retries.length, failures: { ...defaultFailureSettings, produceTimeoutMs: 1_500 } },
    });
    groupId = config.groupId;
    worker = await startWorker(config);
  });

  afterAll(async () => {
    await worker?.close();
    await db?.drop();
  });

  it('does not commit the offset, and delivers the record to the DLQ once it can', async () => {
    const key = `${T}/theme/blocked`;
    const poison = '{"not": "an envelope"}';
    await produce(kafka, names.events, [raw(themeEvent(T, 'blocked', 1)), { key, value: poison }, raw(themeEvent(T, 'blocked', 2))]);
    // The three share one chunk transaction, so both valid events are applied; the offsets are
    // resolved in order, so nothing from the poison record on may be committed.
    await eventually(async () => (await stateOf(db.pool, T, 'blocked'))?.version === 2, { message: 'valid events applied' });
    await sleep(4_000);
    const admin0 = kafka.admin();
    await admin0.connect();
    const [committed] = await admin0.fetchOffsets({ groupId, topics: [names.events] });
    await admin0.disconnect();
    expect(Number(committed!.partitions[0]!.offset)).toBeLessThanOrEqual(1); // the poison is offset 1

    const admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, topicSpecs(settings), 1);
    await admin.disconnect();

    await eventually(() => groupCaughtUp(kafka, groupId, names.events), { timeoutMs: 90_000, message: 'caught up once the DLQ exists' });
    expect((await stateOf(db.pool, T, 'blocked'))?.version).toBe(2);
    const dlq = await eventually(
      async () => {
        const records = await readTopic(kafka, names.dlq);
        return records.length > 0 ? records : undefined;
      },
      { message: 'poison in the DLQ' },
    );
    expect(dlq.every((r) => r.value.toString() === poison && r.headers['dlq-reason'] === 'invalid_envelope')).toBe(true);
  }, 150_000);
});
