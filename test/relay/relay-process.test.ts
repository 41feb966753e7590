import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerTestConfig, metricValue, outboxDrained, produce, raw, themeEvent, useWorker } from '../kit/worker.ts';
import { readTopic, testBrokers } from '../kit/kafka.ts';
import { eventually } from '../kit/eventually.ts';
import { startRelayProcess, type RelayProcessHandle } from '#services/worker/relay-process.ts';
import { startWorker } from '#services/worker/worker.ts';
import { adminReady, spawnService } from '../kit/service.ts';
import { uniqueName } from '../kit/names.ts';

// WORKER_ROLE=apply beside WORKER_ROLE=relay: the apply worker has no relay and NOTIFYs; the relay
// process publishes. The relay still polls: a read can find committed rows held back behind a
// transaction still open anywhere on the server (other suites' included) and must look again, so
// the tests count the notifications the relay process heard rather than rely on one wake-up.
// Waits are liveness bounds, far above the figures.
const POLL_MS = 1_000;
const LIVENESS_MS = 60_000;
const T = 'tenant_relay_process';

describe('the outbox relay in a process of its own (WORKER_ROLE=relay)', () => {
  const { db, kafka, names } = useWorker({ config: { role: 'apply' }, topics: { eventsPartitions: 3 } });
  let relay: RelayProcessHandle;

  beforeAll(async () => {
    relay = await startRelayProcess(
      workerTestConfig({
        brokers: testBrokers(),
        databaseUrl: db.url,
        eventsTopic: names.events,
        appliedTopic: names.applied,
        overrides: { role: 'relay', relayPollMs: POLL_MS },
      }),
    );
  }, LIVENESS_MS);
  afterAll(async () => {
    await relay?.close();
  }, LIVENESS_MS);

  /** All `count` of the tenant's resources applied, and nothing left in the outbox. */
  async function appliedAndDrained(count: number): Promise<boolean> {
    const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM resource_state WHERE tenant_id = $1', [T]);
    return rows[0]!.n === count && (await outboxDrained(db.pool));
  }

  async function publishedIds(): Promise<string[]> {
    return (await readTopic(kafka, names.applied)).map((r) => (JSON.parse(r.value.toString()) as { event_id: string }).event_id);
  }

  it('publishes what an apply worker commits, hears its notifications, and is ready', async () => {
    const events = Array.from({ length: 40 }, (_, i) => themeEvent(T, `a-${i}`, 1));
    await produce(kafka, names.events, events.map(raw));
    await eventually(() => appliedAndDrained(40), { timeoutMs: LIVENESS_MS });
    expect((await publishedIds()).sort()).toEqual(events.map((e) => e.event_id).sort());
    expect(await metricValue(relay.registry, 'webhook_applied_published_total')).toBe(40);
    // A commit's NOTIFY can come after a poll already published its rows.
    await eventually(() => relay.notifications() > 0, { timeoutMs: LIVENESS_MS, message: 'a notification from the apply worker' });
    expect((await relay.readiness()).ready).toBe(true);
  });

  it('listens again after its LISTEN connection is cut, and hears the next commits', async () => {
    const cut = await db.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bridge-relay-listen' AND datname = current_database()`,
    );
    expect(cut.rowCount).toBe(1);
    await eventually(() => !relay.listening(), { timeoutMs: LIVENESS_MS });
    await eventually(() => relay.listening(), { timeoutMs: LIVENESS_MS });
    const heard = relay.notifications();
    const events = Array.from({ length: 10 }, (_, i) => themeEvent(T, `b-${i}`, 1));
    await produce(kafka, names.events, events.map(raw));
    await eventually(() => appliedAndDrained(50), { timeoutMs: LIVENESS_MS });
    expect(await publishedIds()).toEqual(expect.arrayContaining(events.map((e) => e.event_id)));
    expect(await metricValue(relay.registry, 'webhook_applied_published_total')).toBe(50);
    await eventually(() => relay.notifications() > heard, { timeoutMs: LIVENESS_MS, message: 'a notification after the reconnect' });
  });

  it('is not what startWorker runs', async () => {
    await expect(
      startWorker(
        workerTestConfig({
          brokers: testBrokers(),
          databaseUrl: db.url,
          eventsTopic: names.events,
          appliedTopic: names.applied,
          overrides: { role: 'relay' },
        }),
      ),
    ).rejects.toThrow(/WORKER_ROLE=relay/);
  });
});

describe('WORKER_ROLE=apply and WORKER_ROLE=relay as two processes, as deployed', () => {
  const { db, kafka, names } = useWorker({ config: { role: 'apply' }, topics: { eventsPartitions: 3 } });

  it('the relay process publishes what the apply process commits, both ready, both stop cleanly on SIGTERM', async () => {
    const env = {
      ...process.env,
      KAFKA_BROKERS: testBrokers().join(','),
      DATABASE_URL: db.url,
      TOPIC_EVENTS: names.events,
      TOPIC_APPLIED: names.applied,
      TOPIC_RETRY_LEVELS: String(names.retries.length),
      CONSUMER_GROUP: uniqueName('theme-applier'),
      ADMIN_PORT: '0',
      LOG_LEVEL: 'info',
    };
    // The suite's in-process worker is an apply worker too: with the spawned one, two share the group.
    const apply = spawnService('worker', { ...env, WORKER_ROLE: 'apply' });
    const relay = spawnService('worker', { ...env, WORKER_ROLE: 'relay', RELAY_POLL_MS: String(POLL_MS) });
    try {
      await relay.line('relay process started');
      await eventually(async () => adminReady(await relay.adminPort()), { timeoutMs: LIVENESS_MS });
      await eventually(async () => adminReady(await apply.adminPort()), { timeoutMs: LIVENESS_MS });
      const events = Array.from({ length: 30 }, (_, i) => themeEvent(T, `p-${i}`, 1));
      await produce(kafka, names.events, events.map(raw));
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM resource_state WHERE tenant_id = $1', [T]);
          return rows[0]!.n === 30 && (await outboxDrained(db.pool));
        },
        { timeoutMs: LIVENESS_MS },
      );
      const ids = (await readTopic(kafka, names.applied)).map((r) => (JSON.parse(r.value.toString()) as { event_id: string }).event_id);
      expect(ids.sort()).toEqual(events.map((e) => e.event_id).sort());
    } finally {
      await Promise.all([apply.stop(), relay.stop()]);
    }
    expect((await relay.exited).code, relay.output()).toBe(0);
    expect((await apply.exited).code, apply.output()).toBe(0);
    await relay.line('relay process stopped');
  });
});
