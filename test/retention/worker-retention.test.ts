import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '#services/worker/worker.ts';
import { workerConfigFromEnv, workerEnvSchema } from '#services/worker/config.ts';
import { parseConfig } from '#plumbing/config/env.ts';
import { defaultRetentionSettings } from '#domain/retention/index.ts';
import { useTestDatabase } from '../kit/db.ts';
import { testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { workerTestConfig } from '../kit/worker.ts';
import { eventually, sleep } from '../kit/eventually.ts';

async function metric(worker: WorkerHandle, name: string): Promise<Map<string, number>> {
  const found = (await worker.registry.getMetricsAsJSON()).find((m) => m.name === name);
  return new Map((found?.values ?? []).map((v) => [JSON.stringify(v.labels), Number(v.value)]));
}

describe('worker: the retention loop', () => {
  const db = useTestDatabase();
  const kafka = testKafka();
  const { names } = useTestTopics(kafka);
  const workers: WorkerHandle[] = [];

  beforeAll(async () => {
    await db.pool.query(
      `INSERT INTO inbox_events (tenant_id, event_id, status, body_sha256, payload, updated_at)
       SELECT 'tenant_w', 'evt_w_' || i, 'applied', md5(i::text), 'not json', now() - interval '40 days'
       FROM generate_series(1, 30) AS i`,
    );
  });
  afterAll(async () => {
    for (const w of workers) await w.close();
  });

  const config = (retention?: typeof defaultRetentionSettings) =>
    workerTestConfig({
      brokers: testBrokers(),
      databaseUrl: db.url,
      eventsTopic: names.events,
      appliedTopic: names.applied,
      overrides: { ...(retention ? { retention } : {}) },
    });

  it('is on by default from the environment, and off unless configured in tests', () => {
    const fromEnv = workerConfigFromEnv(
      parseConfig(workerEnvSchema, { KAFKA_BROKERS: '127.0.0.1:9092', DATABASE_URL: 'postgres://u@127.0.0.1/db' }),
    );
    expect(fromEnv.retention).toEqual(defaultRetentionSettings);
    expect(fromEnv.retention!.enabled).toBe(true);
    const off = workerConfigFromEnv(
      parseConfig(workerEnvSchema, {
        KAFKA_BROKERS: '127.0.0.1:9092',
        DATABASE_URL: 'postgres://u@127.0.0.1/db',
        RETENTION_ENABLED: 'false',
      }),
    );
    expect(off.retention!.enabled).toBe(false);
    expect(config().retention).toBeUndefined();
  });

  it('a worker without retention (or with it disabled) starts no loop and prunes nothing', async () => {
    const plain = await startWorker(config(), { adminServer: false });
    workers.push(plain);
    const disabled = await startWorker(
      { ...config({ ...defaultRetentionSettings, enabled: false, initialDelayMs: 0 }), clientId: 'disabled' },
      { adminServer: false },
    );
    workers.push(disabled);
    expect(plain.retention).toBeUndefined();
    expect(disabled.retention).toBeUndefined();
    await sleep(500);
    const { rows } = await db.pool.query(`SELECT count(payload)::int AS n FROM inbox_events WHERE tenant_id = 'tenant_w'`);
    expect(rows[0].n).toBe(30);
    expect((await metric(plain, 'webhook_retention_runs_total')).size).toBe(0);
    await plain.close();
    await disabled.close();
  });

  it('an enabled worker runs it shortly after start, counts it in its metrics, and stops it on close', async () => {
    const startedAt = Date.now() / 1000;
    const worker = await startWorker(
      config({ ...defaultRetentionSettings, initialDelayMs: 200, intervalMs: 3_600_000, batchRows: 10, pauseMs: 0 }),
      { adminServer: false },
    );
    workers.push(worker);
    expect(worker.retention).toBeDefined();
    await eventually(async () => worker.retention!.runs >= 1, { timeoutMs: 30_000, message: 'a retention run' });
    const { rows } = await db.pool.query(
      `SELECT count(payload)::int AS n, count(*)::int AS total FROM inbox_events WHERE tenant_id = 'tenant_w'`,
    );
    expect(rows[0]).toEqual({ n: 0, total: 30 });
    expect((await metric(worker, 'webhook_retention_runs_total')).get(JSON.stringify({ result: 'complete' }))).toBe(1);
    const rowsMetric = await metric(worker, 'webhook_retention_rows_total');
    expect(rowsMetric.get(JSON.stringify({ table: 'inbox_events', action: 'pruned_body' }))).toBe(30);
    expect(rowsMetric.get(JSON.stringify({ table: 'applied_outbox', action: 'deleted' }))).toBe(0);
    const last = [...(await metric(worker, 'webhook_retention_last_success_timestamp_seconds')).values()][0]!;
    // The run's own time: after the worker started, not in the future.
    expect(last).toBeGreaterThanOrEqual(Math.floor(startedAt));
    expect(last).toBeLessThanOrEqual(Date.now() / 1000);
    await worker.close();
  });
});
