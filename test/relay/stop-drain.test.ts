import { afterAll, describe, expect, it } from 'vitest';
import { LocalKafka } from '../kit/infra.ts';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { countUnpublishedOutbox } from '#domain/store/outbox.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { topicLayouts } from '#plumbing/kafka/partitioned-send.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { noCrashPoints } from '#services/worker/crash-points.ts';
import { OutboxRelay, relayParts } from '#services/worker/relay/index.ts';
import { useTestDatabase } from '../kit/db.ts';
import { readTopic, testKafka, useTestTopics, useLocalKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePortRange } from '../kit/ports.ts';
import { sourceRecord } from '../kit/worker.ts';

// Longer than the 2 s "no progress" bound the worker's stop used to give the relay, shorter than
// the send timeout and kafkajs's request timeout: the pass in flight waits for the broker and lands.
const PAUSE_MS = 3_500;
const EVENTS = 300;

const basePort = await freePortRange(2);

/**
 * Regression: a worker stopping under load left 273 applied records unpublished (CI, with the whole
 * suite on the broker). Its stop nudged the relay and gave up after 2 s without the cursor moving,
 * which a single slow pass on a busy broker takes. The relay's stop now publishes what was applied
 * before it, bounded in total, and stops at once only where it cannot help: another worker leads.
 */
describe('outbox relay stop: publishes what was applied before it', () => {
  const cluster = new LocalKafka({
    name: `stop-drain-${process.pid}`,
    nodes: 1,
    basePort,
  });
  useLocalKafka(cluster, { startTimeoutMs: 120_000, timeoutMs: 180_000 });
  const kafka = testKafka(uniqueName('drain'), cluster.brokers);
  const applied = useTestTopics(kafka, { eventsPartitions: 3, retryLevels: 0 }).names.applied;
  const db = useTestDatabase();
  let offset = 0;
  const cleanups: Array<() => Promise<void>> = [];

  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup().catch(() => {});
  });

  function startRelay(name: string): OutboxRelay {
    const client = testKafka(uniqueName(name), cluster.brokers);
    const logger = createLogger({ name, level: process.env.TEST_LOG_LEVEL ?? 'silent' });
    const admin = client.admin();
    const relay = new OutboxRelay({
      pool: db.pool,
      ...relayParts({ kafka: client, databaseUrl: db.url, transactionalId: `${applied}.relay`, logger, sendTimeoutMs: 20_000 }),
      layout: async (topic) => {
        await admin.connect();
        return topicLayouts(admin)(topic);
      },
      topic: applied,
      batchSize: 50,
      pollMs: 20,
      sendTimeoutMs: 20_000,
      logger,
      crashPoints: noCrashPoints,
    });
    relay.start();
    cleanups.push(async () => {
      await relay.stop();
      await admin.disconnect();
    });
    return relay;
  }

  async function apply(count: number, prefix: string): Promise<string[]> {
    const records: SourceRecord[] = Array.from({ length: count }, (_, i) => {
      const event = sampleThemeEvent({ resource: { id: `${prefix}-${i}`, version: 1 } });
      offset += 1;
      return sourceRecord(event, offset);
    });
    const results = await new SnapshotApplier({ pool: db.pool }).applyBatch(records);
    expect(results.every((r) => r.outcome === 'applied')).toBe(true);
    return records.map((r) => String(r.key));
  }

  async function waitForLeader(relay: OutboxRelay): Promise<void> {
    // A row published proves the relay holds the leader lock and its producer is connected.
    const [key] = await apply(1, uniqueName('lead'));
    await eventually(async () => (await countUnpublishedOutbox(db.pool)) === 0, { intervalMs: 50, message: `the relay to publish ${key}` });
    expect(relay.running).toBe(true);
  }

  it('keeps publishing through passes slower than 2 s, and stops once what was applied before the stop is on the topic', async () => {
    const relay = startRelay('relay-a');
    await waitForLeader(relay);

    cluster.pauseNode(1);
    let stopMs: number;
    try {
      const prefix = uniqueName('thm');
      const keys = await apply(EVENTS, prefix);
      expect(await countUnpublishedOutbox(db.pool)).toBe(EVENTS);
      const resumed = sleep(PAUSE_MS).then(() => cluster.resumeNode(1));
      const started = performance.now();
      await relay.stop();
      stopMs = performance.now() - started;
      await resumed;

      expect(await countUnpublishedOutbox(db.pool)).toBe(0);
      const published = (await readTopic(kafka, applied)).filter((r) => r.key.includes(prefix)).map((r) => r.key);
      expect(published.sort()).toEqual([...keys].sort());
    } finally {
      cluster.resumeNode(1);
    }
    // It waited for the broker (the pause) instead of giving up; the upper bound guards liveness
    // only, far above the pause and the publishing after it.
    expect(stopMs).toBeGreaterThan(PAUSE_MS - 500);
    expect(stopMs).toBeLessThan(PAUSE_MS + 60_000);
  });

  it('stops at once when another relay leads, leaving the rows to that leader', async () => {
    const leader = startRelay('relay-b');
    await waitForLeader(leader);
    const follower = startRelay('relay-c');

    cluster.pauseNode(1);
    try {
      await apply(20, uniqueName('thm'));
      // With the broker still paused: a follower that waited for a send would take its send
      // timeout (20 s). Half of that is the liveness bound, far above a stop that waits for nothing.
      const started = performance.now();
      await follower.stop();
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(await countUnpublishedOutbox(db.pool)).toBe(20);
    } finally {
      cluster.resumeNode(1);
    }
    await eventually(async () => (await countUnpublishedOutbox(db.pool)) === 0, {
      message: 'the leader to publish the rows the follower left',
    });
  });
});
