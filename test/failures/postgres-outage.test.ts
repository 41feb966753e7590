import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import type { Producer } from '#plumbing/kafka/types.ts';
import { defaultFailureSettings } from '#domain/failures/index.ts';
import type { EventEnvelope } from '#domain/contract/index.ts';
import { topicRecordCount } from '../kit/kafka.ts';
import { groupCaughtUp, raw, themeEvent, metricValue, useWorker } from '../kit/worker.ts';
import { OwnPostgres, useOwnPostgres } from '../kit/own-postgres.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePort } from '../kit/ports.ts';

const T = 'tenant_outage';
const OUTAGE_MS = 30_000;
const RESOURCES = 25;

const pgPort = await freePort();

describe('failures: Postgres outage under a steady stream', () => {
  const own = new OwnPostgres(pgPort);
  // The test's pool: idle connections die with the server; the test expects that.
  const db = useOwnPostgres(own, { poolMax: 2, applicationName: 'outage-test' });
  const { kafka, names, groupId, worker } = useWorker({
    database: db,
    config: (names) => ({
      retryLevels: names.retries.length,
      // Short retry delays so anything wrongly routed would show up quickly; probes capped at 2 s.
      failures: { ...defaultFailureSettings, schedule: { delaysMs: [200, 200, 200, 200], jitter: 0 }, probeMaxMs: 2_000 },
      statementTimeoutMs: 3_000,
    }),
  });
  let producer: Producer;

  beforeAll(async () => {
    producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
    await producer.connect();
  });

  afterAll(async () => {
    await producer?.disconnect();
  });

  it('pauses instead of draining: nothing in a retry topic or the DLQ, everything applied after, lag back to zero', async () => {
    const sent: EventEnvelope[] = [];
    const versions = new Map<string, number>();
    let streaming = true;
    const stream = (async () => {
      for (let i = 0; streaming; i += 1) {
        const batch: EventEnvelope[] = [];
        for (let j = 0; j < 3; j += 1) {
          const id = `r${(i * 3 + j) % RESOURCES}`;
          const version = (versions.get(id) ?? 0) + 1;
          versions.set(id, version);
          batch.push(themeEvent(T, id, version));
        }
        await producer.send({
          topic: names.events,
          acks: -1,
          messages: batch.map((e) => {
            const r = raw(e);
            return { key: r.key, value: r.value };
          }),
        });
        sent.push(...batch);
        await sleep(100);
      }
    })();

    const appliedCount = async () => Number((await db.pool.query('SELECT count(*) AS n FROM inbox_events')).rows[0].n);
    await eventually(async () => (await appliedCount()) > 20, { message: 'some events applied before the outage' });
    await own.stop();
    const stoppedAt = Date.now();
    await eventually(async () => (await metricValue(worker.registry, 'webhook_consumer_paused', { consumer: 'main' })) === 1, {
      timeoutMs: 20_000,
      message: 'main consumer paused',
    });
    await sleep(OUTAGE_MS - (Date.now() - stoppedAt));
    // The whole outage: nothing was routed anywhere.
    expect(await metricValue(worker.registry, 'webhook_consumer_paused', { consumer: 'main' })).toBe(1);
    for (const topic of [...names.retries, names.dlq]) expect(await topicRecordCount(kafka, topic)).toBe(0);
    await own.start();
    await sleep(2_000);
    streaming = false;
    await stream;

    await eventually(() => groupCaughtUp(kafka, groupId, names.events), { timeoutMs: 60_000, message: 'main group caught up' });
    await eventually(async () => (await appliedCount()) === sent.length, { timeoutMs: 30_000, message: 'every event in the inbox' });
    const { rows } = await db.pool.query<{ status: string; n: string }>('SELECT status, count(*) AS n FROM inbox_events GROUP BY status');
    expect(Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]))).toEqual({ applied: sent.length });
    const states = await db.pool.query<{ resource_id: string; version: string }>(
      'SELECT resource_id, version FROM resource_state WHERE tenant_id = $1',
      [T],
    );
    expect(Object.fromEntries(states.rows.map((r) => [r.resource_id, Number(r.version)]))).toEqual(Object.fromEntries(versions));
    for (const topic of [...names.retries, names.dlq]) expect(await topicRecordCount(kafka, topic)).toBe(0);
    expect(await metricValue(worker.registry, 'webhook_consumer_paused', { consumer: 'main' })).toBe(0);
    expect(await metricValue(worker.registry, 'webhook_outage_pauses_total', { consumer: 'main' })).toBeGreaterThanOrEqual(1);
    expect(await metricValue(worker.registry, 'dead_letter_total')).toBe(0);
    console.error(`[outage] ${sent.length} events streamed, Postgres down ${OUTAGE_MS / 1000} s, all applied, no retry or DLQ record`);
  }, 150_000);
});
