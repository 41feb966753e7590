import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Partitioners, type Admin, type Kafka, type Producer } from 'kafkajs';
import { topicLayouts, PartitionedSender } from '../../shared/kafka/partitioned-send.ts';
import { startWorker, type WorkerHandle } from '../../services/worker/worker.ts';
import { LocalKafka } from '../../infra/kafka/local-kafka.ts';
import type { TopicNames } from '../../shared/kafka/topics.ts';
import type { EventEnvelope } from '../../shared/contract/index.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { createTestTopics, testKafka } from '../helpers/kafka.ts';
import { uniqueName } from '../helpers/names.ts';
import { groupCaughtUp, raw, themeEvent, waitFor, workerTestConfig } from '../worker/helpers.ts';
import { topicSize } from './helpers.ts';

const T = 'tenant_failover';

describe('failures: one broker of three killed under load', () => {
  const cluster = new LocalKafka({ name: `failover-${process.pid}`, nodes: 3, basePort: Number(process.env.FAILOVER_BASE_PORT ?? 28092) });
  let kafka: Kafka;
  let db: TestDatabase;
  let producer: Producer;
  let admin: Admin;
  let sender: PartitionedSender;
  let worker: WorkerHandle;
  let names: TopicNames;
  let groupId: string;
  const crashes: string[] = [];

  beforeAll(async () => {
    cluster.wipe();
    await cluster.start(120_000);
    kafka = testKafka(uniqueName('failover'), cluster.brokers);
    ({ names } = await createTestTopics(kafka, { replicationFactor: 3, minInsyncReplicas: 2, eventsPartitions: 3 }));
    db = await createTestDatabase();
    const config = workerTestConfig({
      brokers: cluster.brokers,
      databaseUrl: db.url,
      eventsTopic: names.events,
      appliedTopic: names.applied,
      overrides: { retryLevels: names.retries.length },
    });
    groupId = config.groupId;
    worker = await startWorker(config);
    worker.consumer.on(worker.consumer.events.CRASH, (e) => crashes.push(`${e.payload.error.message} (restart ${e.payload.restart})`));
    producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    admin = kafka.admin();
    await admin.connect();
    // A plain multi-partition send() can resolve without writing part of it when a leader dies
    // (tulios/kafkajs#1303); the ingress-like producer here sends one partition per send().
    sender = new PartitionedSender(producer, topicLayouts(admin));
  }, 180_000);

  afterAll(async () => {
    await producer?.disconnect().catch(() => {});
    await admin?.disconnect().catch(() => {});
    await worker?.close();
    await db?.drop();
    await cluster.stop();
    cluster.wipe();
  });

  it('applies every acknowledged event', async () => {
    const acked: EventEnvelope[] = [];
    let unacked = 0;
    const versions = new Map<string, number>();
    let streaming = true;
    const stream = (async () => {
      for (let i = 0; streaming; i += 1) {
        const batch = Array.from({ length: 10 }, (_, j) => {
          const id = `r${(i * 10 + j) % 40}`;
          const version = (versions.get(id) ?? 0) + 1;
          versions.set(id, version);
          return themeEvent(T, id, version);
        });
        try {
          await Promise.race([
            sender.send({ topic: names.events, acks: -1, messages: batch.map((e) => { const r = raw(e); return { key: r.key, value: r.value }; }) }),
            new Promise((_, reject) => setTimeout(() => reject(new Error('send timeout')), 15_000)),
          ]);
          acked.push(...batch);
        } catch {
          // Not acknowledged: the provider would have had a 503 and retried. Not counted.
          unacked += batch.length;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    await waitFor('load flowing', async () => acked.length >= 200, 30_000);
    await cluster.stopNode(2, 'SIGKILL');
    const killedAt = acked.length;
    await waitFor('load flowing after the kill', async () => acked.length >= killedAt + 300, 60_000);
    streaming = false;
    await stream;

    const ids = acked.map((e) => e.event_id);
    const appliedCount = async () =>
      Number(
        (await db.pool.query<{ n: string }>("SELECT count(*) AS n FROM inbox_events WHERE event_id = ANY($1) AND status = 'applied'", [ids]))
          .rows[0]!.n,
      );
    try {
      await waitFor('every acknowledged event applied', async () => (await appliedCount()) === ids.length, 90_000);
    } catch (error) {
      const onTopic = await topicSize(kafka, names.events);
      throw new Error(
        `${(error as Error).message}: ${await appliedCount()}/${ids.length} applied, ${onTopic} records on the events topic, ` +
          `consumer crashes: ${JSON.stringify(crashes)}`,
      );
    }
    await waitFor('group caught up', () => groupCaughtUp(kafka, groupId, names.events), 60_000);
    expect(await topicSize(kafka, names.dlq)).toBe(0);
    console.error(`[failover] ${acked.length} acknowledged (${killedAt} before the kill), ${unacked} not acknowledged; all acknowledged applied`);
  }, 200_000);
});
