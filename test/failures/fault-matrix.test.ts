import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kafka } from '#plumbing/kafka/types.ts';
import pg from 'pg';
import { LocalKafka, ensureDatabase } from '../kit/infra.ts';
import type { IngressHandle } from '#services/ingress/ingress.ts';
import { oldestUnpublishedOutboxAge } from '#domain/store/outbox.ts';
import { migrate } from '#domain/store/migrate.ts';
import { createPool } from '#plumbing/db/pool.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import { testKafka, topicRecordCount, createTestTopics } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { post, signedRequest, startTestIngress } from '../kit/ingress.ts';
import { groupCaughtUp, outboxDrained } from '../kit/worker.ts';
import {
  AnswerLog,
  answerRecord,
  appliedLedger,
  dlqEntries,
  FINAL_STATUSES,
  firstOf,
  inboxRows,
  metricSum,
  missingFromEventsTopic,
  resourceVersions,
  settledIds,
  stateProblems,
  WorkerProcess,
} from '../kit/ledger.ts';
import { OwnPostgres } from '../kit/own-postgres.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePort, freePortRange } from '../kit/ports.ts';

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

const pgPort = Number(process.env.MATRIX_PG_PORT ?? (await freePort()));
const basePort = Number(process.env.MATRIX_BASE_PORT ?? (await freePortRange(2)));

/**
 * Steady signed traffic through the real ingress, a worker process, a broker and a Postgres of
 * the test's own, and one fault after the other with recovery in between; then the ledger.
 */
describe('failures: fault matrix under steady traffic', () => {
  const own = new OwnPostgres(pgPort);
  const cluster = new LocalKafka({ name: `matrix-${process.pid}`, nodes: 1, basePort });
  let pool: pg.Pool;
  let databaseUrl: string;
  let kafka: Kafka;
  let names: TopicNames;
  let ingress: IngressHandle;
  let worker: WorkerProcess;
  const groupId = uniqueName('matrix-applier');

  beforeAll(async () => {
    await own.init();
    await own.start();
    databaseUrl = await ensureDatabase(own.adminUrl, 'bridge');
    pool = createPool({ url: databaseUrl, max: 4, applicationName: 'matrix-test' });
    pool.on('error', () => {}); // idle connections die with the server during the outage
    await migrate(pool);
    cluster.wipe();
    await cluster.start(120_000);
    kafka = testKafka(uniqueName('matrix'), cluster.brokers);
    ({ names } = await createTestTopics(kafka, { eventsPartitions: 6 }));
    ingress = await startTestIngress(cluster.brokers, names.events, { ackTimeoutMs: 3_000, probeIntervalMs: 250 });
    worker = new WorkerProcess({
      restartAfterKill: false,
      env: {
        KAFKA_BROKERS: cluster.brokers.join(','),
        DATABASE_URL: databaseUrl,
        TOPIC_EVENTS: names.events,
        TOPIC_APPLIED: names.applied,
        TOPIC_RETRY_LEVELS: String(names.retries.length),
        CONSUMER_GROUP: groupId,
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
    await ingress?.close();
    await pool?.end().catch(() => {});
    await own.destroy();
    await cluster.stop();
    cluster.wipe();
  });

  it('keeps every acknowledged event through broker freeze, broker crash, Postgres stop, worker kill and a stuck session', async () => {
    const log = new AnswerLog();
    const versions = new Map<string, number>();
    const accepted = new Map<string, { resource: string; version: number; answeredAt: number }>();
    const inFlight = new Set<string>();
    const pending = new Set<Promise<void>>();
    let tick = 0;
    let cold = 0;

    function pick(): string | undefined {
      if (tick % 10 === 0 && !inFlight.has(HOT)) return HOT;
      for (let n = 0; n < RESOURCES; n += 1) {
        const resource = `mx_r${cold++ % RESOURCES}`;
        if (!inFlight.has(resource)) return resource;
      }
      return undefined;
    }

    // One request per tick. One request per resource at a time, so a resource's versions reach the
    // ingress in order; a refused version is not sent again (the next one supersedes it).
    function fire(): void {
      tick += 1;
      const resource = pick();
      if (resource === undefined) return;
      const version = (versions.get(resource) ?? 0) + 1;
      versions.set(resource, version);
      const request = signedRequest({ event: { tenant_id: TENANT, resource: { id: resource, version } } });
      const event = { eventId: request.eventId, resource, version };
      inFlight.add(resource);
      const sentAt = Date.now();
      const done = post(ingress.url, request)
        .catch((e: Error) => e)
        .then((answer) => {
          const record = answerRecord(sentAt, answer, event);
          log.record(record);
          if (record.status >= 200 && record.status < 300)
            accepted.set(event.eventId, { resource, version, answeredAt: record.answeredAt });
        })
        .finally(() => {
          inFlight.delete(resource);
          pending.delete(done);
        });
      pending.add(done);
    }
    const clock = setInterval(fire, 1000 / RATE);

    // Events known to have a final inbox status (checked once, never again).
    const settled = new Set<string>();
    async function unsettled(ids: string[]): Promise<string[]> {
      const open = ids.filter((id) => !settled.has(id));
      for (const id of await settledIds(pool, TENANT, open)) settled.add(id);
      return open.filter((id) => !settled.has(id));
    }
    async function outboxAgeSeconds(): Promise<number> {
      return oldestUnpublishedOutboxAge(pool);
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
          left = await unsettled(ids);
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
        const stuck = new pg.Client({ connectionString: databaseUrl, application_name: 'matrix-stuck-session' });
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
          const hotBefore = (await resourceVersions(pool, TENANT)).get(HOT);
          const acceptedBefore = accepted.size;
          await sleep(STUCK_SESSION_MS);
          // The session lasted (nothing ended it), the busy key did not move meanwhile although
          // its events kept being accepted, and nothing was routed to a retry topic or the DLQ.
          await stuck
            .query('SELECT 1')
            .catch((e: Error) => stuckProblems.push(`the stuck session did not last ${STUCK_SESSION_MS / 1000} s: ${e.message}`));
          const hotAfter = (await resourceVersions(pool, TENANT)).get(HOT);
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
      clearInterval(clock);
      await Promise.allSettled([...pending]);
    }

    // Everything settles: both groups caught up, nothing received or retrying, outbox published.
    const ids = [...accepted.keys()];
    await eventually(
      async () => {
        if (!(await groupCaughtUp(kafka, groupId, names.events))) return false;
        for (const [i, topic] of names.retries.entries()) {
          if (!(await groupCaughtUp(kafka, `${groupId}.retry.${i + 1}`, topic))) return false;
        }
        const { rows } = await pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM inbox_events WHERE status IN ('received', 'retrying')",
        );
        return rows[0]!.n === 0 && (await unsettled(ids)).length === 0 && (await outboxDrained(pool));
      },
      { timeoutMs: 120_000, message: 'everything settled' },
    ).catch(async (error: Error) => {
      throw new Error(
        `${error.message}: ${(await unsettled(ids)).length} of ${ids.length} accepted events unsettled; worker output:\n${worker.output.slice(-4_000)}`,
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
    // Every acknowledged event ends applied, duplicate or stale: none dead-lettered, retrying or lost.
    const rows = await inboxRows(pool, TENANT, ids);
    const tally: Record<string, number> = {};
    for (const [id, a] of accepted) {
      const row = rows.get(id);
      const status = row?.status ?? 'missing';
      tally[status] = (tally[status] ?? 0) + 1;
      if (!FINAL_STATUSES.has(status)) {
        problems.push(
          `accepted ${id} (${a.resource} v${a.version}) ended ${status}${row ? ` (reason ${row.reason}, attempts ${row.attempts}: ${row.last_error})` : ' (lost)'}`,
        );
      }
    }
    const acceptedMax = new Map<string, number>();
    for (const a of accepted.values()) acceptedMax.set(a.resource, Math.max(acceptedMax.get(a.resource) ?? 0, a.version));
    const state = await resourceVersions(pool, TENANT);
    problems.push(...stateProblems({ accepted: acceptedMax, sent: versions, state }));
    // The applied topic: every applied event once per key in apply order (or a byte-identical
    // replay), ending at resource_state; nothing foreign; every 2xx settled.
    const applied = await appliedLedger({ pool, kafka, appliedTopic: names.applied, tenant: TENANT, accepted: ids });
    problems.push(...applied.problems);
    // Nothing dead-lettered, nothing routed to a retry topic.
    const dlq = await dlqEntries(kafka, names.dlq);
    problems.push(...dlq.map((d) => `dead-lettered: ${d.eventId} (${d.key}) reason ${d.reason}: ${d.error}`));
    const retried: Record<string, number> = {};
    for (const topic of names.retries) {
      const n = await topicRecordCount(kafka, topic);
      if (n > 0) {
        retried[topic] = n;
        problems.push(`${n} records on ${topic}`);
      }
    }
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
