import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalKafka } from '../kit/infra.ts';
import type { IngressHandle } from '#services/ingress/ingress.ts';
import { useTestDatabase } from '../kit/db.ts';
import { testKafka, useTestTopics, useLocalKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { post, signedRequest, startTestIngress, type SignedRequest } from '../kit/ingress.ts';
import { groupCaughtUp, outboxDrained, workerEnv } from '../kit/worker.ts';
import {
  AnswerLog,
  answerRecord,
  appliedLedger,
  dlqEntries,
  FINAL_STATUSES,
  firstOf,
  inboxRows,
  resourceVersions,
  stateProblems,
  WorkerProcess,
} from '../kit/ledger.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePortRange } from '../kit/ports.ts';

const TENANT = 'tenant_acme';
const RESOURCES = 20;
const RUNS = 5;
/** Made poison by FAULT_INJECT: every event of it is dead-lettered, and only those may be. */
const POISON = 'ledger_poison';
/** Fails twice (transient) per worker process, then applies: through the retry chain, never the DLQ. */
const FLAKY = 'ledger_flaky';
/** Share of the requests answered 2xx outside the fault windows (broker restarts). */
const ACCEPTANCE_FLOOR = 0.8;

interface Sent {
  eventId: string;
  resource: string;
  version: number;
}

const basePort = await freePortRange(2);

describe('failures: ledger under broker restarts and worker kill -9', () => {
  const cluster = new LocalKafka({ name: `ledger-${process.pid}`, nodes: 1, basePort });
  useLocalKafka(cluster, { startTimeoutMs: 120_000, timeoutMs: 180_000 });
  const kafka = testKafka(uniqueName('ledger'), cluster.brokers);
  const { names } = useTestTopics(kafka, { eventsPartitions: 3 });
  const db = useTestDatabase();
  let ingress: IngressHandle;
  let worker: WorkerProcess;
  const groupId = uniqueName('ledger-applier');
  const log = new AnswerLog();
  /** Every event the test sent (first delivery), by event id. */
  const sent = new Map<string, Sent>();
  /** Event ids of every poison event sent, whatever the answer: the only ones the DLQ may hold. */
  const poisonSent = new Set<string>();
  /** Highest version sent per resource. */
  const versions = new Map<string, number>();
  const accepted = new Map<string, Sent>();
  const acceptedRequests: SignedRequest[] = [];
  const backwards: string[] = [];
  let monitor: NodeJS.Timeout | undefined;

  beforeAll(async () => {
    ingress = await startTestIngress(cluster.brokers, names.events, { ackTimeoutMs: 3_000, probeIntervalMs: 250 });
    worker = new WorkerProcess({
      restartAfterKill: true,
      env: {
        ...workerEnv({ brokers: cluster.brokers, databaseUrl: db.url, names, group: groupId }),
        LOG_LEVEL: 'warn',
        WORKER_BATCH_SIZE: '50',
        WORKER_SESSION_TIMEOUT_MS: '6000',
        RETRY_DELAYS_MS: '200,300,400,500',
        RETRY_PRODUCE_TIMEOUT_MS: '5000',
        // Faults that feed the retry chain and the DLQ during the run.
        FAULT_INJECT: `transient:${TENANT}/theme/${FLAKY}:2,permanent:${TENANT}/theme/${POISON}:100000`,
      },
    });
    await worker.start();
    await worker.waitReady();
    // State must never move backwards, whatever is killed or restarted.
    const seen = new Map<string, number>();
    monitor = setInterval(() => {
      void resourceVersions(db.pool, TENANT)
        .then((state) => {
          for (const [id, v] of state) {
            const before = seen.get(id) ?? -1;
            if (v < before) backwards.push(`${id}: ${before} -> ${v}`);
            seen.set(id, Math.max(before, v));
          }
        })
        .catch(() => {});
    }, 200);
  }, 180_000);

  afterAll(async () => {
    clearInterval(monitor);
    await worker?.stop();
    await ingress?.close();
  });

  function nextRequest(i: number): { request: SignedRequest; event: Sent; first: boolean } {
    const roll = (i * 7919) % 100;
    if (roll < 8 && acceptedRequests.length > 0) {
      // A provider retry of an earlier delivery: the same bytes, the same event id.
      const request = acceptedRequests[(i * 31) % acceptedRequests.length]!;
      return { request, event: sent.get(request.eventId)!, first: false };
    }
    const resource = roll < 12 ? FLAKY : roll < 15 ? POISON : `ledger_r${i % RESOURCES}`;
    const current = versions.get(resource) ?? 0;
    // Now and then an out-of-order delivery of an older version, under a new event id.
    const version = roll >= 95 && current > 3 ? current - 2 : current + 1;
    versions.set(resource, Math.max(current, version));
    const request = signedRequest({ event: { tenant_id: TENANT, resource: { id: resource, version } } });
    const event = { eventId: request.eventId, resource, version };
    sent.set(event.eventId, event);
    if (resource === POISON) poisonSent.add(event.eventId);
    return { request, event, first: true };
  }

  let counter = 0;
  async function load(ms: number): Promise<void> {
    const until = Date.now() + ms;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (Date.now() < until) {
          const { request, event, first } = nextRequest((counter += 1));
          const sentAt = Date.now();
          const answer = await post(ingress.url, request).catch((e: Error) => e);
          const record = answerRecord(sentAt, answer, event);
          log.record(record);
          if (record.status >= 200 && record.status < 300) {
            accepted.set(event.eventId, event);
            if (first) acceptedRequests.push(request);
          }
          await sleep(15);
        }
      }),
    );
  }

  async function settled(): Promise<boolean> {
    if (!(await groupCaughtUp(kafka, groupId, names.events))) return false;
    for (const [i, topic] of names.retries.entries()) {
      if (!(await groupCaughtUp(kafka, `${groupId}.retry.${i + 1}`, topic))) return false;
    }
    const { rows } = await db.pool.query<{ n: string }>("SELECT count(*) AS n FROM inbox_events WHERE status IN ('received', 'retrying')");
    if (Number(rows[0]!.n) !== 0) return false;
    // The applied topic is checked too: everything applied must have been published.
    return outboxDrained(db.pool);
  }

  async function checkLedger(run: number, runStart: number): Promise<string> {
    const problems: string[] = [];
    const rows = await inboxRows(db.pool, TENANT, [...accepted.keys()]);
    const dlq = await dlqEntries(kafka, names.dlq);
    const dlqIds = new Set(dlq.map((d) => d.eventId));
    const tally: Record<string, number> = {};
    for (const [id, a] of accepted) {
      const row = rows.get(id);
      const status = row?.status ?? 'missing';
      tally[status] = (tally[status] ?? 0) + 1;
      if (a.resource === POISON) {
        // Poison the test sent: dead-lettered, and the DLQ record is there.
        if (status !== 'dead_lettered' || !dlqIds.has(id))
          problems.push(`poison ${id} (v${a.version}) ended ${status}${dlqIds.has(id) ? '' : ', not in the DLQ'}`);
      } else if (!FINAL_STATUSES.has(status)) {
        const why = row ? ` (reason ${row.reason}, attempts ${row.attempts}, last error ${row.last_error})` : ' (no inbox row: lost)';
        problems.push(`${id} (${a.resource} v${a.version}) ended ${status}${why}`);
      }
    }
    // The DLQ holds nothing but the test's own poison.
    for (const d of dlq) {
      if (!poisonSent.has(d.eventId)) {
        const event = sent.get(d.eventId);
        problems.push(
          `honest event dead-lettered: ${d.eventId} (${event ? `${event.resource} v${event.version}` : d.key}) reason ${d.reason}: ${d.error}`,
        );
      }
    }
    // State: per honest resource the highest accepted version, at most the highest sent (a 503 may
    // still have been persisted and then applied).
    const acceptedMax = new Map<string, number>();
    for (const a of accepted.values()) {
      if (a.resource !== POISON) acceptedMax.set(a.resource, Math.max(acceptedMax.get(a.resource) ?? 0, a.version));
    }
    const state = await resourceVersions(db.pool, TENANT);
    problems.push(...stateProblems({ accepted: acceptedMax, sent: versions, state }));
    if (state.has(POISON)) problems.push(`the poison resource has a state row (v${state.get(POISON)})`);
    // The applied topic: every applied event once per key in apply order (or a byte-identical
    // replay), ending at resource_state; nothing foreign; every 2xx settled, the poison dead-lettered.
    const applied = await appliedLedger({
      pool: db.pool,
      kafka,
      appliedTopic: names.applied,
      tenant: TENANT,
      accepted: accepted.keys(),
      deadLettered: poisonSent,
    });
    problems.push(...applied.problems);
    problems.push(...backwards.map((b) => `resource_state moved backwards: ${b}`));
    // Acceptance: an ingress answering 503 to everything would otherwise pass.
    problems.push(...log.acceptanceProblems(ACCEPTANCE_FLOOR, runStart));
    // Restarts: exactly the kills the test did, each followed by one start.
    problems.push(...worker.restartProblems());
    const line =
      `run ${run}: ${log.summary(runStart)}; ${accepted.size} distinct events accepted so far (${poisonSent.size} poison sent), ` +
      `DLQ ${dlq.length}, applied topic ${applied.records} records for ${applied.applied} applied events (${applied.repeated} repeated), ` +
      `worker ${worker.kills} kills / ${worker.starts} starts, ${JSON.stringify(tally)}`;
    expect(firstOf(problems), line).toEqual([]);
    return line;
  }

  for (let run = 1; run <= RUNS; run += 1) {
    it(`run ${run}: every 202 ends applied, stale or duplicate (poison only in the DLQ), state and applied topic agree`, async () => {
      const runStart = Date.now();
      const restartBroker = run % 2 === 0;
      const loading = load(restartBroker ? 9_000 : 5_000);
      // A kill -9 at a random moment of the load (of a worker that is up and consuming).
      await sleep(500 + Math.random() * 3_500);
      await worker.kill();
      if (restartBroker) {
        const window = log.open(`broker restart ${run}`);
        await cluster.stopNode(1);
        await sleep(500);
        await cluster.startNode(1);
        await eventually(async () => ingress.ready(), { timeoutMs: 60_000, message: 'ingress ready again' });
        log.close(window);
        // And once more, while the worker is catching up after the broker came back.
        await sleep(Math.random() * 1_500);
        await worker.kill();
      }
      await loading;
      await eventually(settled, { timeoutMs: 120_000, message: 'everything settled' });
      console.error(`[ledger] ${await checkLedger(run, runStart)}`);
    }, 200_000);
  }
});
