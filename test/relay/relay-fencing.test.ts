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

const SEND_TIMEOUT_MS = 2_000;
// Past the send timeout and past kafkajs's request timeout (10 s), so requests are retried and
// the other relay takes over while the first relay's send is still buffered at the frozen broker.
const PAUSE_MS = 16_000;
const KEYS = 6;

const basePort = await freePortRange(2);

/**
 * Regression: an older version must never become the last applied record of a key. With two
 * workers, a relay whose send timed out rolled back and freed the leader lock while kafkajs still
 * retried that send; the other worker published the same and newer rows; then the old send
 * landed after them (K v2, K v1), and compaction keeps v1.
 */
describe('outbox relay: a broker frozen past the send timeout, two workers', () => {
  const cluster = new LocalKafka({
    name: `relay-fence-${process.pid}`,
    nodes: 1,
    basePort,
  });
  useLocalKafka(cluster, { startTimeoutMs: 120_000, timeoutMs: 180_000 });
  const kafka = testKafka(uniqueName('fence'), cluster.brokers);
  const applied = useTestTopics(kafka, { eventsPartitions: 3, retryLevels: 0 }).names.applied;
  const db = useTestDatabase();
  const relays: Array<{ relay: OutboxRelay; close: () => Promise<void> }> = [];

  afterAll(async () => {
    for (const r of relays) await r.close().catch(() => {});
  });

  /** One worker's relay, built as the worker builds it (its own Kafka client and leader connection). */
  async function startRelay(name: string) {
    const client = testKafka(uniqueName(name), cluster.brokers);
    const logger = createLogger({ name, level: process.env.TEST_LOG_LEVEL ?? 'silent' });
    const admin = client.admin();
    await admin.connect();
    const relay = new OutboxRelay({
      pool: db.pool,
      ...relayParts({
        kafka: client,
        databaseUrl: db.url,
        transactionalId: `${applied}.relay`,
        logger,
        sendTimeoutMs: SEND_TIMEOUT_MS,
        leaderIdleTimeoutMs: 4_000,
      }),
      layout: topicLayouts(admin),
      topic: applied,
      batchSize: 20,
      pollMs: 20,
      sendTimeoutMs: SEND_TIMEOUT_MS,
      logger,
      crashPoints: noCrashPoints,
    });
    relay.start();
    relays.push({
      relay,
      close: async () => {
        await relay.stop();
        await admin.disconnect();
      },
    });
  }

  it("keeps every key's versions increasing on the applied topic, and publishes everything once the broker is back", async () => {
    await startRelay('relay-a');
    await startRelay('relay-b');
    const applier = new SnapshotApplier({ pool: db.pool });
    const ids = Array.from({ length: KEYS }, (_, i) => uniqueName(`thm${i}`));
    let version = 0;
    let offset = 0;
    const applyRound = async () => {
      version += 1;
      const records: SourceRecord[] = ids.map((id) => {
        const event = sampleThemeEvent({ resource: { id, version } });
        offset += 1;
        return sourceRecord(event, offset);
      });
      await applier.applyBatch(records);
    };
    const applyFor = async (ms: number) => {
      const until = Date.now() + ms;
      while (Date.now() < until) {
        await applyRound();
        await sleep(50);
      }
    };

    await applyFor(1_500);
    cluster.pauseNode(1);
    try {
      await applyFor(PAUSE_MS);
    } finally {
      cluster.resumeNode(1);
    }
    await applyFor(1_500);

    await eventually(async () => (await countUnpublishedOutbox(db.pool)) === 0, {
      timeoutMs: 90_000,
      intervalMs: 250,
      message: 'every applied record published after the broker came back',
    });
    // Let any send still retrying inside kafkajs land before reading.
    await sleep(5_000);

    const records = await readTopic(kafka, applied);
    const byKey = new Map<string, string[]>();
    for (const r of records) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r.value.toString('utf8')]);
    const versionOf = (value: string) => (JSON.parse(value) as { resource: { version: number } }).resource.version;
    expect(byKey.size).toBe(KEYS);
    const backwards: string[] = [];
    for (const [key, values] of byKey) {
      const versions = values.map(versionOf);
      for (let i = 1; i < versions.length; i += 1) {
        if (versions[i]! >= versions[i - 1]!) continue;
        // The one step back the relay allows: a batch published again, byte for byte and in the
        // same order, because the broker carried out a commit that the relay had given up on (its
        // EndTxn reached the frozen broker before the send timeout, and the broker committed it
        // when it woke; the relay's cursor had not moved, so the next attempt sent the same rows).
        // Downstream sees the same records once more, then the newer ones again. A record that
        // was never on the topic before, or a repeat that is not the whole run, is a real disorder.
        const first = values.indexOf(values[i]!);
        const run = values.slice(first, i);
        const again = values.slice(i, i + run.length);
        const republished = first < i && again.length === run.length && again.every((v, t) => v === run[t]);
        if (!republished) backwards.push(`${key}: v${versions[i - 1]} then v${versions[i]} (at ${i} of ${versions.length})`);
      }
      expect(versions.at(-1), key).toBe(version);
      expect(new Set(versions).size, `${key} has every applied version`).toBe(version);
    }
    expect(backwards).toEqual([]);
  });
});
