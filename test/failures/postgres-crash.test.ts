import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oldestUnpublishedOutboxAge } from '#domain/store/outbox.ts';
import { testBrokers } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { useIngress } from '../kit/ingress.ts';
import { groupCaughtUp, outboxDrained, workerEnv } from '../kit/worker.ts';
import { BlackHoleProxy } from './black-hole-proxy.ts';
import { firstOf, metricSum, WorkerProcess } from '../kit/ledger.ts';
import { OwnPostgres, useOwnPostgres } from '../kit/own-postgres.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePort } from '../kit/ports.ts';
import { useProviderTraffic } from '../kit/traffic.ts';

const TENANT = 'tenant_acme';
const RESOURCES = 120;
/** Requests per second, on a fixed clock whatever the answers. */
const RATE = 30;
const FAULT_MS = 30_000;
const LOST_CUT_MS = 15_000;
const STEADY_MS = 4_000;
/**
 * Liveness bounds, counted from the moment the fault ends: the first new event applied, and every
 * event accepted so far applied and its record published. The worker must get there by itself; how
 * soon is set by its timeouts (docs/operations.md, "When Postgres fails"), not by the CPU, and the
 * times are measured in docs/testing.md. The bounds sit far above them.
 */
const RESUME_BOUND_MS = 120_000;
const CAUGHT_UP_BOUND_MS = 180_000;

const pgPort = await freePort();

/**
 * Postgres failing as machines do, with fsync on, under steady signed traffic through the real
 * ingress and a worker process: the server's processes SIGKILLed (crash recovery), frozen by
 * SIGSTOP, and cut off from the worker by a network black hole. Each: nothing acknowledged lost,
 * nothing routed to a retry topic or the DLQ, the worker never dies, and processing resumes by
 * itself within the bounds above.
 */
describe('failures: Postgres crashes, freezes and partitions under load', () => {
  const own = new OwnPostgres(pgPort, { fsync: true });
  // The test's own view of the database goes straight to the server, never through the proxy.
  const db = useOwnPostgres(own, { poolMax: 3, applicationName: 'pg-crash-test' });
  const { kafka, names, ingress } = useIngress({ topics: { eventsPartitions: 6 }, config: { ackTimeoutMs: 3_000, probeIntervalMs: 250 } });
  let proxy: BlackHoleProxy;
  let worker: WorkerProcess;
  const groupId = uniqueName('pg-crash-applier');

  beforeAll(async () => {
    proxy = new BlackHoleProxy({ host: '127.0.0.1', port: own.port });
    await proxy.listen();
    const workerUrl = new URL(db.url);
    workerUrl.port = String(proxy.port);
    worker = new WorkerProcess({
      restartAfterKill: false,
      env: {
        ...workerEnv({ brokers: testBrokers(), databaseUrl: workerUrl.toString(), names, group: groupId }),
        LOG_LEVEL: 'warn',
        WORKER_BATCH_SIZE: '100',
        // Short, so anything wrongly routed would walk the whole chain into the DLQ within the run.
        RETRY_DELAYS_MS: '500,500,500,500',
        RETRY_PRODUCE_TIMEOUT_MS: '5000',
        // Every database setting is the production default.
      },
    });
    await worker.start();
    await worker.waitReady();
  }, 180_000);

  afterAll(async () => {
    own.freeze(false);
    proxy?.heal();
    await worker?.stop();
    await proxy?.close();
  });

  // Started once the worker is ready, stopped before the afterAll above.
  const traffic = useProviderTraffic({ url: () => ingress.url, tenant: TENANT, rate: RATE, resources: RESOURCES, prefix: 'pgc_r' });
  const { log, accepted } = traffic;

  /**
   * After the fault ends: when the first event accepted after it is applied (processing resumed),
   * and when every event accepted until then is settled and published (caught up).
   */
  async function recovery(name: string, endedAt: number): Promise<{ resumedMs: number; caughtUpMs: number }> {
    const probeIds = () => log.answers.filter((a) => a.sentAt >= endedAt && a.status >= 200 && a.status < 300).map((a) => a.eventId);
    let resumedMs: number | undefined;
    const deadline = endedAt + CAUGHT_UP_BOUND_MS + 60_000;
    let ids: string[] = [];
    for (;;) {
      try {
        const probes = probeIds();
        if (resumedMs === undefined && probes.length > 0 && (await traffic.unsettled(db.pool, probes)).length < probes.length)
          resumedMs = Date.now() - endedAt;
        if (resumedMs !== undefined) {
          if (ids.length === 0) ids = [...accepted.keys()];
          if ((await traffic.unsettled(db.pool, ids)).length === 0 && (await oldestUnpublishedOutboxAge(db.pool)) < 1)
            return { resumedMs, caughtUpMs: Date.now() - endedAt };
        }
      } catch {
        // Postgres still coming back
      }
      if (Date.now() > deadline) {
        throw new Error(
          `${name}: not recovered ${((Date.now() - endedAt) / 1000).toFixed(0)} s after the fault ended (resumed: ${resumedMs ?? 'no'}); ` +
            `${(await traffic.unsettled(db.pool, [...accepted.keys()]).catch(() => [])).length} accepted events unsettled; worker output:\n${worker.output.slice(-4_000)}`,
        );
      }
      await sleep(250);
    }
  }

  /** The ledger of everything accepted so far; traffic stops meanwhile, so that state and topic hold still. */
  async function ledgerProblems(): Promise<{ problems: string[]; line: string }> {
    await traffic.stop();
    const ids = [...accepted.keys()];
    await eventually(
      async () => {
        if (!(await groupCaughtUp(kafka, groupId, names.events))) return false;
        return (await traffic.unsettled(db.pool, ids)).length === 0 && (await outboxDrained(db.pool));
      },
      { timeoutMs: 60_000, message: 'everything settled' },
    );
    const { problems, tally, applied, dlq } = await traffic.ledger({ pool: db.pool, kafka, names });
    problems.push(...worker.restartProblems());
    // The ingress does not depend on Postgres: it accepts throughout.
    problems.push(...log.acceptanceProblems(0.95));
    const line =
      `${log.summary()}; inbox ${JSON.stringify(tally)}; applied topic ${applied.records} records ` +
      `for ${applied.applied} applied events (${applied.repeated} repeated); DLQ ${dlq.length}`;
    traffic.start();
    return { problems, line };
  }

  /** What the worker saw: its outage pauses and its failures by class and code (counters since its start). */
  async function workerView(): Promise<{ pauses: number; failures: Map<string, number> }> {
    const text = await worker.metrics();
    const failures = new Map<string, number>();
    for (const line of text.split('\n')) {
      const m = /^webhook_failures_total\{([^}]*)\}\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
      failures.set(`${labels['class']}:${labels['code']}`, Number(m[2]));
    }
    return { pauses: metricSum(text, 'webhook_outage_pauses_total', { consumer: 'main' }), failures };
  }

  /** inject resolves to when the fault was lifted, if that was before it returned (a restart). */
  async function underFault(name: string, inject: () => Promise<number | void>): Promise<void> {
    await eventually(async () => accepted.size >= 100 && (await traffic.unsettled(db.pool, [...accepted.keys()])).length < 50, {
      timeoutMs: 60_000,
      message: 'traffic accepted and applied',
    });
    await sleep(STEADY_MS);
    const before = await workerView();
    const window = log.open(name);
    const started = Date.now();
    const lifted = await inject();
    const endedAt = Date.now();
    log.close(window);
    const { resumedMs, caughtUpMs } = await recovery(name, endedAt);
    const { problems, line } = await ledgerProblems();
    // The fault bit: no apply transaction started in the fault (after its first second, which
    // may still see a chunk begun before it).
    const during = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM inbox_events WHERE first_seen_at > $1 AND first_seen_at < $2',
      [new Date(started + 1_000), new Date(lifted ?? endedAt)],
    );
    if (during.rows[0]!.n > 0) problems.push(`${during.rows[0]!.n} events were first applied during the fault: it did not bite`);
    // What the worker went through, for the record (it may pause for an outage, or see the
    // timeouts in its chunk fallback and group rejoin first).
    const after = await workerView();
    const seen = [...after.failures].map(([k, n]) => [k, n - (before.failures.get(k) ?? 0)] as const).filter(([, n]) => n > 0);
    const summary =
      `[pg-crash] ${name}: fault ${((endedAt - started) / 1000).toFixed(1)} s; processing resumed ${(resumedMs / 1000).toFixed(1)} s ` +
      `and caught up ${(caughtUpMs / 1000).toFixed(1)} s after it ended; worker paused ${after.pauses - before.pauses} times, ` +
      `failures ${JSON.stringify(Object.fromEntries(seen))}; ${line}`;
    console.error(summary);
    expect(firstOf(problems), summary).toEqual([]);
    // Liveness bounds (above), far above the measured times and the timeouts that set them.
    expect(resumedMs, summary).toBeLessThan(RESUME_BOUND_MS);
    expect(caughtUpMs, summary).toBeLessThan(CAUGHT_UP_BOUND_MS);
  }

  it('SIGKILL of every Postgres process (crash recovery), restarted after a few seconds', async () => {
    await underFault('postgres SIGKILL', async () => {
      await own.crash();
      await sleep(3_000);
      const restarting = Date.now();
      await own.start();
      return restarting;
    });
  }, 420_000);

  it(`SIGSTOP of every Postgres process for ${FAULT_MS / 1000} s, then SIGCONT`, async () => {
    await underFault(`postgres SIGSTOP ${FAULT_MS / 1000} s`, async () => {
      const frozen = own.freeze(true);
      expect(frozen.length).toBeGreaterThan(3);
      try {
        await sleep(FAULT_MS);
      } finally {
        own.freeze(false);
      }
    });
  }, 420_000);

  it(`a network black hole between the worker and Postgres for ${FAULT_MS / 1000} s`, async () => {
    await underFault(`black hole ${FAULT_MS / 1000} s`, async () => {
      proxy.blackHole();
      try {
        await sleep(FAULT_MS);
      } finally {
        proxy.heal();
      }
    });
  }, 420_000);

  // Shorter than the pool's idle timeout (30 s): connections idle since before the cut are still
  // in the workers' pools when it heals, dead for good, and the next query on each waits for its
  // timeout. That is a failover that moved the server's address, seen from the pools.
  it(`a black hole for ${LOST_CUT_MS / 1000} s that never gives back the connections open during it`, async () => {
    await underFault(`black hole ${LOST_CUT_MS / 1000} s, open connections lost`, async () => {
      proxy.blackHole();
      try {
        await sleep(LOST_CUT_MS);
      } finally {
        proxy.heal({ dropOpen: true });
      }
    });
  }, 420_000);
});
