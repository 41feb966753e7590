import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { LocalKafka } from '../kit/infra.ts';
import { createTestTopics, testKafka } from '../kit/kafka.ts';
import { useTestDatabase } from '../kit/db.ts';
import { uniqueName } from '../kit/names.ts';
import { WorkerProcess } from '../kit/ledger.ts';
import { themeEvent, workerEnv } from '../kit/worker.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePort, freePortRange } from '../kit/ports.ts';
import { resourceKey } from '#domain/contract/envelope.ts';
import type { Kafka } from '#plumbing/kafka/types.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';

const T = 'tenant_stop';
/** The worker's own bound on its stop, set low here so the test is short. */
const STOP_TIMEOUT_MS = 8_000;
/**
 * Liveness, not a figure: the stop is bounded by STOP_TIMEOUT_MS, and this allows 25 s more for a
 * slow machine. Without the bound, the first case waits for the group's rebalance timeout (60 s).
 */
const EXIT_WITHIN_MS = STOP_TIMEOUT_MS + 25_000;
const basePort = await freePortRange(2);

/**
 * An orchestrator gives a stopping process a grace period (Kubernetes: 30 s) and then SIGKILLs it.
 * The worker's stop must end within WORKER_STOP_TIMEOUT_MS whatever the group and the brokers do.
 * A stop that gives up on a step ends as a SIGKILL would, which the ledger and crash tests cover:
 * what it did not commit is redelivered.
 */
describe('failures: a worker stop is bounded', () => {
  const cluster = new LocalKafka({ name: `stop-bounded-${process.pid}`, nodes: 1, basePort });
  const db = useTestDatabase();
  let kafka: Kafka;
  let names: TopicNames;

  beforeAll(async () => {
    cluster.wipe();
    await cluster.start(120_000);
    kafka = testKafka(uniqueName('stop-bounded'), cluster.brokers);
    ({ names } = await createTestTopics(kafka, { eventsPartitions: 3 }));
  }, 180_000);

  afterAll(async () => {
    await cluster.stop();
    cluster.wipe();
  }, 60_000);

  function worker(group: string, env: Record<string, string> = {}): WorkerProcess {
    return new WorkerProcess({
      restartAfterKill: false,
      env: {
        ...workerEnv({ brokers: cluster.brokers, databaseUrl: db.url, names, group }),
        LOG_LEVEL: 'info',
        WORKER_STOP_TIMEOUT_MS: String(STOP_TIMEOUT_MS),
        ...env,
      },
    });
  }

  async function send(from: number, count: number): Promise<void> {
    const producer = kafka.producer();
    await producer.connect();
    const events = Array.from({ length: count }, (_, i) => themeEvent(T, `sb_r${from + i}`, 1));
    await producer.send({ topic: names.events, messages: events.map((e) => ({ key: resourceKey(e), value: JSON.stringify(e) })) });
    await producer.disconnect();
  }

  const applied = async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM resource_state')).rows[0]!.n;

  /** SIGTERM, then how long until the process is gone (or undefined past `withinMs`). */
  async function terminate(w: WorkerProcess, withinMs: number): Promise<number | undefined> {
    const pid = w.pid!;
    const at = Date.now();
    process.kill(pid, 'SIGTERM');
    const gone = () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    while (!gone() && Date.now() - at < withinMs) await sleep(100);
    return gone() ? Date.now() - at : undefined;
  }

  it('exits within its bound while its group waits in a rebalance for a frozen member', async () => {
    const group = uniqueName('stop-frozen');
    // A long session: the frozen member stays in the group, so the rebalance waits for it until
    // the rebalance timeout instead of dropping it when its session expires.
    const env = { WORKER_SESSION_TIMEOUT_MS: '120000' };
    const [a, b] = [worker(group, env), worker(group, env)];
    const joiner = kafka.consumer({ groupId: group, sessionTimeout: 120_000 });
    try {
      await Promise.all([a.start(), b.start()]);
      await Promise.all([a.waitReady(120_000), b.waitReady(120_000)]);
      await send(0, 20);
      await eventually(async () => (await applied()) === 20, { timeoutMs: 60_000, message: 'the first 20 applied' });
      // Both members settled in one generation first: a member frozen in the middle of its own
      // join would let the next rebalance complete without it.
      const admin = kafka.admin();
      await admin.connect();
      try {
        await eventually(
          async () => {
            const [described] = (await admin.describeGroups([group])).groups;
            return described?.state === 'Stable' && described.members.length === 2;
          },
          { timeoutMs: 60_000, message: 'the group stable with both workers' },
        );
      } finally {
        await admin.disconnect();
      }
      b.freeze();
      // A third member joins: the group rebalances, and `a` rejoins and waits for `b`.
      const since = Date.now();
      await joiner.connect();
      await joiner.subscribe({ topic: names.events });
      void joiner.run({ eachBatch: async () => {} });
      // `a` hears of the rebalance at its next heartbeat (every 12 s with this session) and rejoins:
      // the main group's line (not a retry group's, `<group>.retry.n`) logged after the join.
      const rejoining = (line: string) => {
        if (!line.includes(`"groupId":"${group}"`) || !line.includes('The group is rebalancing, re-joining')) return false;
        try {
          return Date.parse((JSON.parse(line) as { time: string }).time) >= since;
        } catch {
          return false;
        }
      };
      await eventually(async () => a.output.split('\n').some(rejoining), {
        timeoutMs: 90_000,
        message: 'the first worker rejoining',
      });
      await sleep(1_000);
      const tookMs = await terminate(a, 120_000);
      console.log(`stop took ${tookMs} ms; its last lines:\n${a.output.slice(-2_500)}`);
      expect(tookMs, 'the worker exited').toBeDefined();
      // Liveness: the bound plus a wide margin (EXIT_WITHIN_MS).
      expect(tookMs!).toBeLessThan(EXIT_WITHIN_MS);
      expect(a.output).toContain('"msg":"worker stop ran out of time');
    } finally {
      b.thaw();
      await Promise.all([a.stop(), b.stop(), joiner.disconnect().catch(() => {})]);
    }
  }, 400_000);

  it('exits within its bound when its broker died a moment before', async () => {
    const w = worker(uniqueName('stop-down'));
    try {
      await w.start();
      await w.waitReady(120_000);
      await cluster.stopNode(1, 'SIGKILL');
      await sleep(1_000);
      const tookMs = await terminate(w, 120_000);
      console.log(`stop took ${tookMs} ms; its last lines:\n${w.output.slice(-2_500)}`);
      expect(tookMs, 'the worker exited').toBeDefined();
      // Liveness: the bound plus a wide margin (EXIT_WITHIN_MS).
      expect(tookMs!).toBeLessThan(EXIT_WITHIN_MS);
    } finally {
      await w.stop();
      await cluster.startNode(1, 120_000);
    }
  }, 400_000);

  it('exits within its bound when its trace collector takes requests and never answers', async () => {
    // A real OTLP/HTTP peer that holds every export open: the exporter's last flush would wait for
    // its own timeouts (120 s here) after the stop's steps are done.
    const held: http.ServerResponse[] = [];
    const collector = http.createServer((req, res) => {
      req.resume();
      held.push(res);
    });
    const port = await freePort();
    await new Promise<void>((resolve) => collector.listen(port, '127.0.0.1', resolve));
    const w = worker(uniqueName('stop-otel'), {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_EXPORTER_OTLP_TIMEOUT: '120000',
      OTEL_BSP_EXPORT_TIMEOUT: '120000',
    });
    try {
      await w.start();
      await w.waitReady(120_000);
      const before = await applied();
      await send(1_000, 10);
      await eventually(async () => (await applied()) === before + 10, { timeoutMs: 60_000, message: 'traced events applied' });
      const tookMs = await terminate(w, 150_000);
      console.log(`stop took ${tookMs} ms with ${held.length} exports held; its last lines:\n${w.output.slice(-2_500)}`);
      expect(held.length, 'the worker exported spans to the collector').toBeGreaterThan(0);
      expect(tookMs, 'the worker exited').toBeDefined();
      // Liveness: the bound plus a wide margin (EXIT_WITHIN_MS).
      expect(tookMs!).toBeLessThan(EXIT_WITHIN_MS);
    } finally {
      await w.stop();
      for (const res of held) res.destroy();
      collector.closeAllConnections();
      await new Promise((resolve) => collector.close(resolve));
    }
  }, 400_000);
});
