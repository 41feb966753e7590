import { describe, expect, it } from 'vitest';
import { parseConfig } from '#plumbing/config/env.ts';
import { failureSettingsFrom, failuresEnv } from '#domain/failures/index.ts';
import { topicRecordCount } from '../kit/kafka.ts';
import { groupCaughtUp, produce, raw, themeEvent, metricValue, useWorker } from '../kit/worker.ts';
import { OwnPostgres, useOwnPostgres } from '../kit/own-postgres.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePort } from '../kit/ports.ts';

const T = 'tenant_spin';

const pgPort = await freePort();

/**
 * Regression: during a Postgres outage a retry consumer span in a tight fetch loop. Its topic was
 * paused by the outage, but a partition paused until its record was due got resumed by that
 * record's timer; the handler saw the outage and returned without resolving, and kafkajs fetched
 * the same record again at once, over and over, until the database came back.
 */
describe('failures: a retry consumer during a Postgres outage', () => {
  const own = new OwnPostgres(pgPort);
  const db = useOwnPostgres(own, { poolMax: 2, applicationName: 'spin-test' });
  const { kafka, names, groupId, worker } = useWorker({
    database: db,
    topics: { eventsPartitions: 3, retryLevels: 1 },
    config: {
      failures: failureSettingsFrom(
        parseConfig(failuresEnv, {
          RETRY_DELAYS_MS: '6000',
          RETRY_JITTER: '0',
          OUTAGE_PROBE_MAX_MS: '1000',
          FAULT_INJECT: `transient:${T}/theme/early:1,transient:${T}/theme/late:1`,
        }),
      ),
      retryLevels: 1,
      statementTimeoutMs: 3_000,
    },
    deps: { adminServer: false },
  });

  it('stays paused and idle until the database is back, then applies both retried events', async () => {
    const early = themeEvent(T, 'early', 1);
    const late = themeEvent(T, 'late', 1);
    await produce(kafka, names.events, [raw(early)]);
    await sleep(1_500);
    await produce(kafka, names.events, [raw(late)]);
    await eventually(async () => (await topicRecordCount(kafka, names.retries[0]!)) === 2, {
      timeoutMs: 20_000,
      message: 'both events in the retry topic',
    });
    await own.stop();
    // `early` comes due first, meets the outage and pauses the retry topic; `late` comes due while it is paused.
    await eventually(async () => (await metricValue(worker.registry, 'webhook_consumer_paused', { consumer: 'retry.1' })) === 1, {
      timeoutMs: 20_000,
      message: 'the retry consumer paused',
    });
    await sleep(2_500);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await sleep(6_000);
    const cpu = process.cpuUsage(cpu0);
    const busy = (cpu.user + cpu.system) / 1000 / (performance.now() - t0);
    await own.start();

    await eventually(() => groupCaughtUp(kafka, `${groupId}.retry.1`, names.retries[0]!), {
      timeoutMs: 60_000,
      message: 'the retry group caught up',
    });
    const { rows } = await db.pool.query<{ event_id: string; status: string }>(
      'SELECT event_id, status FROM inbox_events WHERE tenant_id = $1',
      [T],
    );
    expect(Object.fromEntries(rows.map((r) => [r.event_id, r.status]))).toEqual({
      [early.event_id]: 'applied',
      [late.event_id]: 'applied',
    });
    expect(await topicRecordCount(kafka, names.dlq)).toBe(0);
    // Paused and waiting costs next to nothing; the loop kept a core busy.
    expect(busy, `CPU share of the test process while paused: ${busy.toFixed(2)}`).toBeLessThan(0.25);
  }, 150_000);
});
