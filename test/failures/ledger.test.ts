import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kafka } from 'kafkajs';
import { LocalKafka } from '../../infra/kafka/local-kafka.ts';
import type { IngressHandle } from '../../services/ingress/ingress.ts';
import type { TopicNames } from '../../shared/kafka/topics.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { testKafka } from '../helpers/kafka.ts';
import { uniqueName } from '../helpers/names.ts';
import { post, signedRequest, startTestIngress, type SignedRequest } from '../ingress/helpers.ts';
import { createTopicsRetrying, groupCaughtUp, readTopic, waitFor } from '../worker/helpers.ts';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const TENANT = 'tenant_acme';
const RESOURCES = 20;
const RUNS = 5;
const FINAL = new Set(['applied', 'stale', 'duplicate', 'duplicate_version']);

interface Accepted {
  eventId: string;
  resource: string;
  version: number;
}

/** Restarts the worker process whenever it dies (as a supervisor would); kill() is a SIGKILL. */
class SupervisedWorker {
  #child: ChildProcess | undefined;
  #active = true;
  #log = '';
  starts = 0;
  constructor(private readonly env: Record<string, string>) {}

  start(): void {
    if (!this.#active) return;
    this.starts += 1;
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/worker/main.ts'], {
      cwd: repoRoot,
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (d: Buffer) => {
      this.#log = (this.#log + d.toString()).slice(-20_000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('exit', () => {
      if (this.#child === child) this.#child = undefined;
      if (this.#active) setTimeout(() => this.start(), 100);
    });
    this.#child = child;
  }

  kill(): void {
    this.#child?.kill('SIGKILL');
  }

  get output(): string {
    return this.#log;
  }

  async stop(): Promise<void> {
    this.#active = false;
    const child = this.#child;
    if (!child) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

describe('failures: ledger under broker restarts and worker kill -9', () => {
  const cluster = new LocalKafka({ name: `ledger-${process.pid}`, nodes: 1, basePort: Number(process.env.LEDGER_BASE_PORT ?? 28192) });
  let kafka: Kafka;
  let names: TopicNames;
  let db: TestDatabase;
  let ingress: IngressHandle;
  let worker: SupervisedWorker;
  const groupId = uniqueName('ledger-applier');
  const accepted = new Map<string, Accepted>();
  const versions = new Map<string, number>();
  const sentRequests: SignedRequest[] = [];
  const backwards: string[] = [];
  let refused = 0;
  let monitor: NodeJS.Timeout | undefined;

  beforeAll(async () => {
    cluster.wipe();
    await cluster.start(120_000);
    kafka = testKafka(uniqueName('ledger'), cluster.brokers);
    ({ names } = await createTopicsRetrying(kafka, { eventsPartitions: 3 }));
    db = await createTestDatabase();
    ingress = await startTestIngress(cluster.brokers, names.events, { ackTimeoutMs: 3_000, probeIntervalMs: 250 });
    worker = new SupervisedWorker({
      KAFKA_BROKERS: cluster.brokers.join(','),
      DATABASE_URL: db.url,
      TOPIC_EVENTS: names.events,
      TOPIC_APPLIED: names.applied,
      TOPIC_RETRY_LEVELS: String(names.retries.length),
      CONSUMER_GROUP: groupId,
      ADMIN_PORT: '0',
      LOG_LEVEL: 'warn',
      WORKER_BATCH_SIZE: '50',
      WORKER_SESSION_TIMEOUT_MS: '6000',
      RETRY_DELAYS_MS: '200,300,400,500',
      RETRY_PRODUCE_TIMEOUT_MS: '5000',
      // Faults that feed the retry chain and the DLQ during the run.
      FAULT_INJECT: `transient:${TENANT}/theme/ledger_flaky:2,permanent:${TENANT}/theme/ledger_poison:100000`,
    });
    worker.start();
    // State must never move backwards, whatever is killed or restarted.
    const seen = new Map<string, number>();
    monitor = setInterval(() => {
      void db.pool
        .query<{ resource_id: string; version: string }>('SELECT resource_id, version FROM resource_state WHERE tenant_id = $1', [TENANT])
        .then(({ rows }) => {
          for (const r of rows) {
            const v = Number(r.version);
            const before = seen.get(r.resource_id) ?? -1;
            if (v < before) backwards.push(`${r.resource_id}: ${before} -> ${v}`);
            seen.set(r.resource_id, Math.max(before, v));
          }
        })
        .catch(() => {});
    }, 200);
  }, 180_000);

  afterAll(async () => {
    clearInterval(monitor);
    await worker?.stop();
    await ingress?.close();
    await db?.drop();
    await cluster.stop();
    cluster.wipe();
  });

  function nextRequest(i: number): { request: SignedRequest; record?: Accepted } {
    const roll = (i * 7919) % 100;
    if (roll < 8 && sentRequests.length > 0) {
      // A provider retry of an earlier delivery: the same bytes, the same event id.
      return { request: sentRequests[(i * 31) % sentRequests.length]! };
    }
    const resource = roll < 12 ? 'ledger_flaky' : roll < 15 ? 'ledger_poison' : `ledger_r${i % RESOURCES}`;
    const current = versions.get(resource) ?? 0;
    // Now and then an out-of-order delivery of an older version, under a new event id.
    const version = roll >= 95 && current > 3 ? current - 2 : current + 1;
    versions.set(resource, Math.max(current, version));
    const request = signedRequest({ event: { tenant_id: TENANT, resource: { id: resource, version } } });
    return { request, record: { eventId: request.eventId, resource, version } };
  }

  async function load(ms: number): Promise<void> {
    const until = Date.now() + ms;
    let i = accepted.size + refused + 1;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (Date.now() < until) {
          const { request, record } = nextRequest((i += 1));
          const answer = await post(ingress.url, request).catch(() => ({ status: 0 }));
          if (answer.status === 202) {
            const known = accepted.get(request.eventId);
            const fromRecord = record ?? known;
            if (fromRecord) accepted.set(request.eventId, fromRecord);
            if (record) sentRequests.push(request);
          } else {
            refused += 1;
          }
          await new Promise((r) => setTimeout(r, 15));
        }
      }),
    );
  }

  async function settled(): Promise<boolean> {
    if (!(await groupCaughtUp(kafka, groupId, names.events))) return false;
    for (const [i, topic] of names.retries.entries()) {
      if (!(await groupCaughtUp(kafka, `${groupId}.retry.${i + 1}`, topic))) return false;
    }
    const { rows } = await db.pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM inbox_events WHERE status IN ('received', 'retrying')",
    );
    return Number(rows[0]!.n) === 0;
  }

  async function checkLedger(run: number): Promise<Record<string, number>> {
    const ids = [...accepted.keys()];
    const { rows } = await db.pool.query<{ event_id: string; status: string; reason: string | null }>(
      'SELECT event_id, status, reason FROM inbox_events WHERE event_id = ANY($1)',
      [ids],
    );
    const byId = new Map(rows.map((r) => [r.event_id, r]));
    const dlq = await readTopic(kafka, names.dlq);
    const dlqReasons = new Map<string, string>();
    for (const r of dlq) {
      const eventId = (JSON.parse(r.value.toString()) as { event_id: string }).event_id;
      if (r.headers['dlq-reason']) dlqReasons.set(eventId, r.headers['dlq-reason']);
    }
    const tally: Record<string, number> = {};
    const problems: string[] = [];
    for (const [id, a] of accepted) {
      const row = byId.get(id);
      const status = row?.status ?? 'missing';
      tally[status] = (tally[status] ?? 0) + 1;
      if (FINAL.has(status)) continue;
      if (status === 'dead_lettered' && dlqReasons.has(id)) continue;
      problems.push(`run ${run}: ${id} (${a.resource} v${a.version}) ended ${status}`);
    }
    expect(problems.slice(0, 10)).toEqual([]);
    // The final state of each resource is the highest version that was not dead-lettered.
    const expected = new Map<string, number>();
    for (const [id, a] of accepted) {
      if (byId.get(id)?.status === 'dead_lettered') continue;
      expected.set(a.resource, Math.max(expected.get(a.resource) ?? 0, a.version));
    }
    const state = await db.pool.query<{ resource_id: string; version: string }>(
      'SELECT resource_id, version FROM resource_state WHERE tenant_id = $1',
      [TENANT],
    );
    const stored = new Map(state.rows.map((r) => [r.resource_id, Number(r.version)]));
    // A request answered 503 (ack timeout during the broker restart) may still have been persisted,
    // and then it is applied too: so at least the highest accepted version, at most the highest sent.
    const wrong: string[] = [];
    for (const [resource, version] of expected) {
      const got = stored.get(resource);
      if (got === undefined || got < version || got > (versions.get(resource) ?? 0)) wrong.push(`${resource}: ${got} vs accepted ${version}`);
    }
    expect(wrong).toEqual([]);
    expect(backwards).toEqual([]);
    return tally;
  }

  for (let run = 1; run <= RUNS; run += 1) {
    it(`run ${run}: every 202 ends applied, stale, duplicate or in the DLQ with a reason`, async () => {
      const restartBroker = run % 2 === 0;
      const loading = load(restartBroker ? 9_000 : 5_000);
      // A kill -9 at a random moment of the load.
      await new Promise((r) => setTimeout(r, 500 + Math.random() * 3_500));
      worker.kill();
      if (restartBroker) {
        await cluster.stopNode(1);
        await new Promise((r) => setTimeout(r, 500));
        await cluster.startNode(1);
        // And once more, while the worker is catching up after the broker came back.
        await new Promise((r) => setTimeout(r, Math.random() * 1_500));
        worker.kill();
      }
      await loading;
      await waitFor('everything settled', settled, 120_000);
      const tally = await checkLedger(run);
      console.error(`[ledger] run ${run}: ${accepted.size} accepted so far, ${refused} refused, worker starts ${worker.starts}, ${JSON.stringify(tally)}`);
    }, 200_000);
  }
});
