import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalKafka } from '../kit/infra.ts';
import { useLocalKafka, useTestAdmin } from '../kit/kafka.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { uniqueName } from '../kit/names.ts';
import { groupCaughtUp, raw, themeEvent, useWorker } from '../kit/worker.ts';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePortRange } from '../kit/ports.ts';

const T = 'tenant_acme';
/** A killed broker stays down past broker.session.timeout.ms (9 s): its partitions get new leaders. */
const DOWN_MS = 12_000;
const OFFSETS_PARTITIONS = 10; // offsets.topic.num.partitions of LocalKafka

/** The __consumer_offsets partition of a group: Kafka's abs(groupId.hashCode()) % partitions. */
function offsetsPartition(groupId: string): number {
  let hash = 0;
  for (let i = 0; i < groupId.length; i += 1) hash = (Math.imul(hash, 31) + groupId.charCodeAt(i)) | 0;
  return (hash & 0x7fffffff) % OFFSETS_PARTITIONS;
}

const basePort = await freePortRange(6);

/**
 * The group's coordinator dies, and once it is back, the preferred leader election hands its
 * __consumer_offsets partition back to it: the coordinator moves twice while the worker holds
 * connections to both brokers. kafkajs keeps committing to the coordinator it joined with while
 * that broker answers; only a re-join looks it up again. The worker must get back to committing
 * its offsets, not apply on with every commit refused (which leaves the group's lag growing and
 * every event redelivered after the next restart).
 */
describe('failures: the group coordinator moves away and back under load', () => {
  const cluster = new LocalKafka({
    name: `coordinator-move-${process.pid}`,
    nodes: 3,
    basePort,
    // The preferred leader election runs every few seconds here instead of every five minutes.
    brokerProperties: { 'leader.imbalance.check.interval.seconds': '3' },
  });
  useLocalKafka(cluster, { startTimeoutMs: 150_000, timeoutMs: 240_000 });
  // Its own connection errors while a broker is down are expected: not logged unless asked for.
  const clusterKafka = createKafka({
    brokers: cluster.brokers,
    clientId: uniqueName('coordinator-move'),
    logger: createLogger({ name: 'test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
  });
  const admin = useTestAdmin(clusterKafka);
  const { kafka, names, groupId, worker } = useWorker({
    cluster: { brokers: cluster.brokers, kafka: clusterKafka },
    topics: { replicationFactor: 3, minInsyncReplicas: 2, eventsPartitions: 6 },
    config: (names) => ({ retryLevels: names.retries.length }),
    timeoutMs: 240_000,
  });
  const commits: number[] = [];
  const rejoins: number[] = [];
  const crashes: string[] = [];
  let producing = false;
  let producer: Promise<void> | undefined;

  beforeAll(() => {
    worker.consumer.on(worker.consumer.events.COMMIT_OFFSETS, () => commits.push(Date.now()));
    worker.consumer.on(worker.consumer.events.GROUP_JOIN, () => rejoins.push(Date.now()));
    // kafkajs restarts the consumer itself after a crash it can retry (a broker gone); one it
    // cannot would end the worker's consumption.
    worker.consumer.on(worker.consumer.events.CRASH, (e) => {
      if (!e.payload.restart) crashes.push(e.payload.error.message);
    });
  });

  afterAll(async () => {
    producing = false;
    await producer;
  });

  async function coordinatorOf(): Promise<number> {
    const { topics } = await admin.fetchTopicMetadata({ topics: ['__consumer_offsets'] });
    const partition = topics[0]!.partitions.find((p) => p.partitionId === offsetsPartition(groupId))!;
    return partition.leader;
  }

  it('commits offsets again after the coordinator moved away and back, and catches up once the load stops', async () => {
    // Steady load: 30 events every 100 ms over 60 resources, each a newer version, from one
    // producer that keeps trying while a broker is down.
    const sender = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
    await sender.connect();
    let version = 0;
    producing = true;
    producer = (async () => {
      while (producing) {
        version += 1;
        const messages = Array.from({ length: 30 }, (_, i) => raw(themeEvent(T, `cm_r${i * 2 + (version % 2)}`, version)));
        await sender.send({ topic: names.events, acks: -1, messages }).catch(() => {});
        await sleep(100);
      }
      await sender.disconnect();
    })();
    await eventually(async () => commits.length >= 5, { timeoutMs: 60_000, message: 'the worker commits' });

    const coordinator = await coordinatorOf();
    const preferred = (await admin.fetchTopicMetadata({ topics: ['__consumer_offsets'] })).topics[0]!.partitions.find(
      (p) => p.partitionId === offsetsPartition(groupId),
    )!.replicas[0]!;
    await cluster.stopNode(coordinator, 'SIGKILL');
    await eventually(async () => (await coordinatorOf().catch(() => coordinator)) !== coordinator, {
      timeoutMs: 60_000,
      message: 'the coordinator moved off the killed broker',
    });
    await sleep(DOWN_MS);
    await cluster.startNode(coordinator);
    // The election hands the partition back to its preferred replica (the killed broker, if it led
    // as the preferred one): the second move, with the worker still connected to the other broker.
    await eventually(async () => (await coordinatorOf().catch(() => -1)) === preferred, {
      timeoutMs: 90_000,
      message: `the preferred replica ${preferred} leads the group's offsets partition again`,
    });
    const movedBackAt = Date.now();

    // Liveness bounds only (far above a healthy run): commits land again after the move back...
    await eventually(async () => commits.some((at) => at > movedBackAt + 1_000), {
      timeoutMs: 60_000,
      message: `offsets committed after the coordinator moved back (joins: ${rejoins.length})`,
    });
    // ...and the group's committed offsets reach the end of the topic once the load stops.
    producing = false;
    await producer;
    await eventually(() => groupCaughtUp(kafka, groupId, names.events), {
      timeoutMs: 60_000,
      message: `group caught up (joins: ${rejoins.length})`,
    });
    const firstAfter = commits.find((at) => at > movedBackAt)!;
    console.error(
      `[coordinator-move] coordinator ${coordinator} killed, back at ${preferred}; joins ${rejoins.length}, first commit ${firstAfter - movedBackAt} ms after the move back`,
    );
    expect(crashes).toEqual([]);
  });
});
