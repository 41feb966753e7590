import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { LocalKafka } from '../kit/infra.ts';
import { oldestUnpublishedOutboxAge } from '#domain/store/outbox.ts';
import { testKafka, topicRecordCount, useLocalKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { useIngress } from '../kit/ingress.ts';
import { groupCaughtUp, outboxDrained, workerEnv } from '../kit/worker.ts';
import { firstOf, metricSum, missingFromEventsTopic, resourceVersions, WorkerProcess } from '../kit/ledger.ts';
import { OwnPostgres, useOwnPostgres } from '../kit/own-postgres.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePort, freePortRange } from '../kit/ports.ts';
import { ProviderTraffic } from '../kit/traffic.ts';

const TENANT = 'tenant_acme';
const RESOURCES = Number(process.env.MATRIX_RESOURCES ?? 300);
/** Requests per second, fired on a fixed clock whatever the answers. */
const RATE = Number(process.env.MATRIX_RATE ?? 40);
/** Every tenth request goes to this resource (if its previous one was answered): a busy key. */
const HOT = 'mx_hot';
const HOT_KEY = `${TENANT}/theme/${HOT}`;
const RELAY_SEND_TIMEOUT_MS = 3_000;
const BROKER_PAUSE_MS = 10_000;
const POSTGRES_DOWN_MS = 20_000;
const STUCK_SESSION_MS = 60_000;
const STEADY_MS = 3_000;
const ACCEPTANCE_FLOOR = 0.8;

const pgPort = await freePort();
const basePort = await freePortRange(2);

/**
 * Steady signed traffic through the real ingress, a worker process, a broker and a Postgres of
 * the test's own, and one fault after the other with recovery in between; then the ledger.
 */
describe('failures: fault matrix under steady traffic', () => {
  const own = new OwnPostgres(pgPort);
  const db = useOwnPostgres(own, { poolMax: 4, applicationName: 'matrix-test' });
  const cluster = new LocalKafka({ name: `matrix-${process.pid}`, nodes: 1, basePort });
  useLocalKafka(cluster, { startTimeoutMs: 120_000, timeoutMs: 180_000 });
  const { kafka, names, ingress } = useIngress({
    cluster: { brokers: cluster.brokers, kafka: testKafka(uniqueName('matrix'), cluster.brokers) },
    topics: { eventsPartitions: 6 },
    config: { ackTimeoutMs: 3_000, probeIntervalMs: 250 },
  });
  let worker: WorkerProcess;
  const groupId = uniqueName('matrix-applier');

  beforeAll(async () => {
    worker = new WorkerProcess({
      restartAfterKill: false,
      env: {
        ...workerEnv({ brokers: cluster.brokers, databaseUrl: db.url, names, group: groupId }),
        LOG_LEVEL: 'warn',
        WORKER_BATCH_SIZE: '100',
        WORKER_SESSION_TIMEOUT_MS: '10000',
        // Shorter than the broker pause: the relay's send times out and its producer is replaced.
        RELAY_SEND_TIMEOUT_MS: String(RELAY_SEND_TIMEOUT_MS),
        // Lock waits give up after 5 s (lock_timeout = min(statement timeout, 5 s)), many times
        // during the stuck session.
        DATABASE_STATEMENT_TIMEOUT_MS: '5000',
        // Bounds the worker's own sessions. The stuck session below is NOT one of a bridge pool (a
        // plain client, and this Postgres sets no server-wide timeout), so nothing ends it for the
        // worker: what is under test is how the worker behaves while it lasts (pause and wait,
        // never retry-route or dead-letter), not this timeout.
        DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: '10000',
        // Short, so anything wrongly routed would walk the whole chain into the DLQ within the run.
        RETRY_DELAYS_MS: '500,500,500,500',
        RETRY_PRODUCE_TIMEOUT_MS: '5000',
        OUTAGE_PROBE_MAX_MS: '2000',
      },
    });
    await worker.start();
    await worker.waitReady();
  }, 180_000);

  afterAll(async () => {
    try {
      cluster.resumeNode(1);
    } catch {
      // not paused, or not running
    }
    await worker?.stop();
  });

  it('keeps every acknowledged event through broker freeze, broker crash, Postgres stop, worker kill and a stuck session', async () => {
    const traffic = new ProviderTraffic({
      url: () => ingress.url,
      tenant: TENANT,
      rate: RATE,
      resources: RESOURCES,
      prefix: 'mx_r',
      hot: HOT,
    });
    const { log, accepted } = traffic;
    traffic.start();

    async function outboxAgeSeconds(): Promise<number> {
      return oldestUnpublishedOutboxAge(db.pool);
    }

    /** Ingress accepting again, and every event accepted so far applied and published. */
    async function recover(name: string): Promise<void> {
      const started = Date.now();
      await eventually(async () => ingress.ready(), { timeoutMs: 90_000, message: `${name}: ingress ready` });
      await eventually(async () => log.answers.some((a) => a.sentAt >= started && a.status === 202), {
        timeoutMs: 60_000,
        message: `${name}: a request accepted again`,
      });
      const ids = [...accepted.keys()];
      let left: string[] = ids;
      let age = 0;
      const deadline = Date.now() + 120_000;
      for (;;) {
        try {
          left = await traffic.unsettled(db.pool, ids);
          age = left.length === 0 ? await outboxAgeSeconds() : age;
          if (left.length === 0 && age < 2) return;
        } catch {
          // Postgres still coming back
        }
        if (Date.now() > deadline) {
          throw new Error(
            `${name}: not recovered after 120 s: ${left.length} of ${ids.length} accepted events without a final status, ` +
              `oldest unpublished applied record ${age.toFixed(1)} s old; worker output:\n${worker.output.slice(-4_000)}`,
          );
        }
        await sleep(500);
      }
    }

    const faults: string[] = [];
    const stuckProblems: string[] = [];
    let lockTimeouts = 0;
    let pauses = 0;
    let failureSamples = '';
    async function fault(name: string, inject: () => Promise<void>): Promise<void> {
      const window = log.open(name);
      const t0 = Date.now();
      await inject();
      const injected = Date.now();
      await recover(name);
      log.close(window);
      faults.push(`${name}: fault ${((injected - t0) / 1000).toFixed(1)} s, recovered in ${((Date.now() - injected) / 1000).toFixed(1)} s`);
      await sleep(STEADY_MS);
    }

    try {
      await recover('warm-up');
      await eventually(async () => accepted.size >= 200, { timeoutMs: 60_000, message: 'traffic flowing' });
      await sleep(STEADY_MS);

      await fault(`broker SIGSTOP ${BROKER_PAUSE_MS / 1000} s`, async () => {
        cluster.pauseNode(1);
        try {
          await sleep(BROKER_PAUSE_MS);
        } finally {
          cluster.resumeNode(1);
        }
      });

      await fault('broker SIGKILL and restart', async () => {
        await cluster.stopNode(1, 'SIGKILL');
        await cluster.startNode(1);
      });

      await fault(`Postgres stopped ${POSTGRES_DOWN_MS / 1000} s`, async () => {
        const t0 = Date.now();
        await own.stop();
        await sleep(POSTGRES_DOWN_MS - (Date.now() - t0));
        await own.start();
      });

      await fault('worker SIGKILL and restart', async () => {
        await worker.kill();
        await worker.start();
        await worker.waitReady();
      });

      await fault(`idle-in-transaction session ${STUCK_SESSION_MS / 1000} s on ${HOT_KEY}`, async () => {
        // Not a bridge pool: a plain client, so no idle_in_transaction_session_timeout ends it.
        const stuck = new pg.Client({ connectionString: db.url, application_name: 'matrix-stuck-session' });
        stuck.on('error', () => {});
        await stuck.connect();
        try {
          await stuck.query('BEGIN');
          // The lock every apply of this key takes first, and a row written: an xid that also holds
          // back the relay's snapshot horizon.
          await stuck.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 7261))', [HOT_KEY]);
          await stuck.query(
            `INSERT INTO applied_outbox (event_id, key, payload, source_topic, source_partition, source_offset) VALUES ('evt_matrix_stuck', 'x/theme/x', '{}', 't', 0, 0)`,
          );
          const hotBefore = (await resourceVersions(db.pool, TENANT)).get(HOT);
          const acceptedBefore = accepted.size;
          await sleep(STUCK_SESSION_MS);
          // The session lasted (nothing ended it), the busy key did not move meanwhile although
          // its events kept being accepted, and nothing was routed to a retry topic or the DLQ.
          await stuck
            .query('SELECT 1')
            .catch((e: Error) => stuckProblems.push(`the stuck session did not last ${STUCK_SESSION_MS / 1000} s: ${e.message}`));
          const hotAfter = (await resourceVersions(db.pool, TENANT)).get(HOT);
          if (hotAfter !== hotBefore) stuckProblems.push(`${HOT} moved from v${hotBefore} to v${hotAfter} while its lock was held`);
          const hotAccepted = [...accepted.values()].filter((a) => a.resource === HOT && a.version > (hotBefore ?? 0)).length;
          if (hotAccepted === 0) stuckProblems.push(`no event of ${HOT} accepted while its lock was held: the fault did not bite`);
          if (accepted.size - acceptedBefore < 100)
            stuckProblems.push(`only ${accepted.size - acceptedBefore} events accepted during the stuck session`);
          for (const topic of [...names.retries, names.dlq]) {
            const n = await topicRecordCount(kafka, topic);
            if (n > 0) stuckProblems.push(`${n} records on ${topic} while the session was stuck`);
          }
          // The worker (started afresh by the fault before, so its counters cover this one) hit
          // lock timeouts and paused like for an outage, and routed nothing.
          const metrics = await worker.metrics();
          // (lock_timeout and statement_timeout are both 5 s here: either may fire first.)
          lockTimeouts =
            metricSum(metrics, 'webhook_failures_total', { class: 'outage', code: 'lock_timeout' }) +
            metricSum(metrics, 'webhook_failures_total', { class: 'outage', code: 'statement_timeout' });
          pauses = metricSum(metrics, 'webhook_outage_pauses_total', { consumer: 'main' });
          failureSamples = metrics
            .split('\n')
            .filter((l) => l.startsWith('webhook_failures_total{'))
            .join(', ');
          if (lockTimeouts === 0 || pauses === 0) {
            stuckProblems.push(
              `the worker saw ${lockTimeouts} lock or statement timeouts and paused ${pauses} times during the stuck session (${failureSamples})`,
            );
          }
          const routed = metricSum(metrics, 'webhook_retries_total') + metricSum(metrics, 'dead_letter_total');
          if (routed > 0) stuckProblems.push(`the worker routed ${routed} events to a retry topic or the DLQ during the stuck session`);
        } finally {
          await stuck.query('ROLLBACK').catch(() => {});
          await stuck.end().catch(() => {});
        }
      });
    } finally {
      await traffic.stop();
    }

    // Everything settles: both groups caught up, nothing received or retrying, outbox published.
    const ids = [...accepted.keys()];
    await eventually(
      async () => {
        if (!(await groupCaughtUp(kafka, groupId, names.events))) return false;
        for (const [i, topic] of names.retries.entries()) {
          if (!(await groupCaughtUp(kafka, `${groupId}.retry.${i + 1}`, topic))) return false;
        }
        const { rows } = await db.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM inbox_events WHERE status IN ('received', 'retrying')",
        );
        return rows[0]!.n === 0 && (await traffic.unsettled(db.pool, ids)).length === 0 && (await outboxDrained(db.pool));
      },
      { timeoutMs: 120_000, message: 'everything settled' },
    ).catch(async (error: Error) => {
      throw new Error(
        `${error.message}: ${(await traffic.unsettled(db.pool, ids)).length} of ${ids.length} accepted events unsettled; worker output:\n${worker.output.slice(-4_000)}`,
      );
    });

    const problems: string[] = [...stuckProblems];
    // Every 2xx answer is on the events topic.
    const events = await missingFromEventsTopic(kafka, names.events, ids);
    problems.push(
      ...events.missing.map(
        (id) => `accepted ${id} (${accepted.get(id)!.resource} v${accepted.get(id)!.version}) is not on the events topic`,
      ),
    );
    // Every acknowledged event ends applied, duplicate or stale; state, applied topic, DLQ and retry
    // topics agree with what was accepted.
    const { problems: ledger, tally, applied, dlq, retried } = await traffic.ledger({ pool: db.pool, kafka, names });
    problems.push(...ledger);
    // The worker died only when the test killed it, and was started once after that.
    problems.push(...worker.restartProblems());
    problems.push(...log.acceptanceProblems(ACCEPTANCE_FLOOR));

    const summary =
      `[matrix] ${log.summary()}; ${faults.join('; ')}; inbox ${JSON.stringify(tally)}; events topic ${events.records} records; ` +
      `applied topic ${applied.records} records for ${applied.applied} applied events (${applied.repeated} repeated); stuck session: ${lockTimeouts} lock/statement timeouts, ${pauses} pauses (${failureSamples}); DLQ ${dlq.length}; retry topics ${JSON.stringify(retried)}; worker ${worker.kills} kills / ${worker.starts} starts`;
    console.error(summary);
    expect(firstOf(problems), summary).toEqual([]);
  }, 720_000);
});
