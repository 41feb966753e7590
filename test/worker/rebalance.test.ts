import { afterAll, describe, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '#services/worker/worker.ts';
import type { EventEnvelope } from '#domain/contract/index.ts';
import { useTestDatabase } from '../kit/db.ts';
import { testBrokers, testKafka, createTestTopics } from '../kit/kafka.ts';
import { groupCaughtUp, outboxDrained, produce, raw, themeEvent, workerTestConfig } from '../kit/worker.ts';
import { eventually } from '../kit/eventually.ts';

describe('worker: a member leaves mid-stream (rebalance)', () => {
  const db = useTestDatabase();
  const kafka = testKafka();
  const workers: WorkerHandle[] = [];

  afterAll(async () => {
    for (const w of workers) await w.close();
  });

  it('the remaining member finishes; nothing is applied twice and every resource ends at its last version', async () => {
    const { names } = await createTestTopics(kafka, { eventsPartitions: 4 });
    const base = workerTestConfig({
      brokers: testBrokers(),
      databaseUrl: db.url,
      eventsTopic: names.events,
      appliedTopic: names.applied,
      overrides: { batchSize: 5, partitionsConcurrency: 2, sessionTimeoutMs: 6000 },
    });
    const a = await startWorker(base, { adminServer: false });
    const b = await startWorker({ ...base, clientId: `${base.clientId}-b` }, { adminServer: false });
    workers.push(b);

    const latest = new Map<string, EventEnvelope>();
    const deliveries: EventEnvelope[] = [];
    for (let v = 1; v <= 20; v += 1) {
      for (let r = 0; r < 40; r += 1) {
        const e = themeEvent('tenant_rebalance', `res${r}`, v);
        latest.set(`res${r}`, e);
        deliveries.push(e);
      }
    }
    await produce(kafka, names.events, deliveries.map(raw));
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM inbox_events');
        return rows[0]!.n > 50;
      },
      { message: 'some progress' },
    );
    await a.close();
    await eventually(() => groupCaughtUp(kafka, base.groupId, names.events), { timeoutMs: 90_000, message: 'caught up' });
    await eventually(() => outboxDrained(db.pool), { message: 'outbox drained' });

    const { rows } = await db.pool.query<{ resource_id: string; version: string }>(
      "SELECT resource_id, version FROM resource_state WHERE tenant_id = 'tenant_rebalance'",
    );
    expect(rows).toHaveLength(40);
    for (const row of rows) expect(Number(row.version)).toBe(latest.get(row.resource_id)!.resource.version);
    const counts = await db.pool.query<{ applied: number; outbox: number; inbox: number }>(
      `SELECT (SELECT count(*)::int FROM inbox_events WHERE status = 'applied') AS applied,
              (SELECT count(*)::int FROM applied_outbox) AS outbox,
              (SELECT count(*)::int FROM inbox_events) AS inbox`,
    );
    expect(counts.rows[0]).toEqual({ applied: 800, outbox: 800, inbox: 800 });
  });
});
