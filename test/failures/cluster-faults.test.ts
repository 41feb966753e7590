import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import { LocalKafka, repoRoot, ensureDatabase } from '../kit/infra.ts';
import { TOPIC_RESOURCE_TYPE, type TopicNames } from '#plumbing/kafka/topics.ts';
import type pg from 'pg';
import { createPool } from '#plumbing/db/pool.ts';
import { migrate } from '#domain/store/migrate.ts';
import { OwnPostgres } from '../kit/own-postgres.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { uniqueName } from '../kit/names.ts';
import { freePort, freePortRange } from '../kit/ports.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { post, signedRequest, type SignedRequest } from '../kit/ingress.ts';
import { createTestTopics } from '../kit/kafka.ts';
import { groupCaughtUp, outboxDrained, workerEnv } from '../kit/worker.ts';
import {
  AnswerLog,
  answerRecord,
  appliedLedger,
  dlqEntries,
  firstOf,
  inboxRows,
  metricSum,
  missingFromEventsTopic,
  resourceVersions,
  stateProblems,
  WorkerProcess,
} from '../kit/ledger.ts';
import { eventually, sleep } from '../kit/eventually.ts';

/**
 * The bridge as deployed, several of everything: three brokers (replication 3, min.insync.replicas
 * 2 on every topic, the internal ones too), two ingresses and three workers in one group, each a
 * process of its own, under steady signed traffic from providers that retry on the other ingress.
 * Machines die one after another, then several at once. Every acknowledged event applies, the
 * applied topic holds every applied event once and in order, nothing is dead-lettered, and the
 * bridge is back to zero lag within LAG_BOUND_MS of the load stopping.
 */

const TENANT = 'tenant_acme';
const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;
const SENDERS = Number(process.env.CLUSTER_FAULTS_SENDERS ?? 12);
const RESOURCES = Number(process.env.CLUSTER_FAULTS_RESOURCES ?? 300);
/** Pause of each provider between two events: about SENDERS * 1000 / (PACE_MS + latency) requests a second. */
const PACE_MS = 120;
const EVENTS_PARTITIONS = 6;
const SESSION_TIMEOUT_MS = 10_000;
/** Frozen for longer than the session timeout and the relay leader's idle timeout (20 s, services/worker/relay/parts.ts). */
const FREEZE_MS = 25_000;
/** A killed broker stays down past broker.session.timeout.ms (9 s): its partitions get new leaders. */
const BROKER_DOWN_MS = 12_000;
/** From the load stopping to zero lag: events and retry groups caught up, outbox published, every 2xx applied. */
const LAG_BOUND_MS = 60_000;

/** An ingress process on a port of its own that it keeps across restarts (a supervisor's). */
class IngressProcess {
  service: ServiceProcess | undefined;
  starts = 0;
  kills = 0;
  readonly unexpectedExits: string[] = [];
  /** When it was down (from the kill to ready again). */
  readonly down: Array<{ from: number; to?: number }> = [];
  #killing = false;

  constructor(
    readonly name: string,
    readonly port: number,
    readonly adminPort: number,
    readonly env: Record<string, string>,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.starts += 1;
    const service = spawnService('ingress', {
      ...this.env,
      PORT: String(this.port),
      ADMIN_PORT: String(this.adminPort),
      HOST: '127.0.0.1',
    });
    this.service = service;
    service.child.once('exit', (code, signal) => {
      if (!(this.#killing && signal === 'SIGKILL') && this.service === service)
        this.unexpectedExits.push(`${this.name} exited (code ${code}, signal ${signal}): ${service.output().slice(-2_000)}`);
    });
    await eventually(
      async () => {
        if (service.child.exitCode !== null) throw new Error(`${this.name} exited: ${service.output().slice(-2_000)}`);
        const res = await fetch(`http://127.0.0.1:${this.adminPort}/readyz`, { signal: AbortSignal.timeout(2_000) });
        await res.text();
        return res.status === 200;
      },
      { timeoutMs: 90_000, message: `${this.name} ready` },
    );
    const last = this.down.at(-1);
    if (last && last.to === undefined) last.to = Date.now();
  }

  async kill(): Promise<void> {
    const child = this.service!.child;
    const exited = new Promise((r) => child.once('exit', r));
    this.#killing = true;
    this.kills += 1;
    this.down.push({ from: Date.now() });
    child.kill('SIGKILL');
    await exited;
    this.#killing = false;
  }

  wasDown(sentAt: number, answeredAt: number): boolean {
    // A request on the wire when the kill came, or sent before it was ready again.
    return this.down.some((d) => answeredAt >= d.from - 50 && sentAt <= (d.to ?? Infinity));
  }

  async stop(): Promise<void> {
    this.#killing = true;
    await this.service?.stop();
  }
}

interface Attempt {
  ingress: number;
  sentAt: number;
  answeredAt: number;
  status: number;
  error?: string;
}

const basePort = await freePortRange(6);

describe('distributed: three brokers, two ingresses, three workers, machines that die', () => {
  const cluster = new LocalKafka({
    name: `cluster-faults-${process.pid}`,
    nodes: 3,
    basePort,
  });
  let kafka: Kafka;
  let admin: Admin;
  let names: TopicNames;
  // A Postgres of its own (fsync on, as a deployment runs it): the relay reads below the server's
  // snapshot xmin, so an open transaction of any other test on a shared server would stall it.
  let own: OwnPostgres;
  let db: { url: string; pool: pg.Pool };
  const groupId = uniqueName('cluster-applier');
  const ingresses: IngressProcess[] = [];
  const workers: WorkerProcess[] = [];
  const log = new AnswerLog();
  const attempts: Attempt[] = [];
  /** Highest version sent per resource, and every accepted event. */
  const versions = new Map<string, number>();
  const accepted = new Map<string, { resource: string; version: number }>();
  const notes: string[] = [];
  /** Committed offsets of the group per partition: the highest seen, and any step back. */
  const committedMax = new Map<number, number>();
  const committedBack: string[] = [];
  let streaming = false;
  let senders: Promise<void>[] = [];
  let monitor: Promise<void> | undefined;
  let monitoring = false;

  beforeAll(async () => {
    cluster.wipe();
    await cluster.start(180_000);
    // Its own connection errors while a broker is down are expected: not logged unless asked for.
    kafka = createKafka({
      brokers: cluster.brokers,
      clientId: uniqueName('cluster'),
      logger: createLogger({ name: 'test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    });
    admin = kafka.admin();
    await admin.connect();
    ({ names } = await createTestTopics(kafka, { replicationFactor: 3, minInsyncReplicas: 2, eventsPartitions: EVENTS_PARTITIONS }));
    own = new OwnPostgres(await freePort(), { fsync: true, maxConnections: 100 });
    await own.init();
    await own.start();
    const url = await ensureDatabase(own.adminUrl, 'bridge');
    db = { url, pool: createPool({ url, max: 5, applicationName: 'cluster-faults-test' }) };
    await migrate(db.pool);
    const brokers = cluster.brokers.join(',');
    for (const name of ['ingress-a', 'ingress-b']) {
      const ingress = new IngressProcess(name, await freePort(), await freePort(), {
        ...devEnv,
        KAFKA_BROKERS: brokers,
        TOPIC_EVENTS: names.events,
        LOG_LEVEL: 'warn',
      });
      ingresses.push(ingress);
    }
    for (let i = 0; i < 3; i += 1) {
      workers.push(
        new WorkerProcess({
          restartAfterKill: true,
          env: {
            ...workerEnv({ brokers: cluster.brokers, databaseUrl: db.url, names, group: groupId }),
            LOG_LEVEL: 'warn',
            WORKER_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
          },
        }),
      );
    }
    await Promise.all([...ingresses.map((i) => i.start()), ...workers.map((w) => w.start())]);
    await Promise.all(workers.map((w) => w.waitReady(120_000)));
  }, 300_000);

  afterAll(async () => {
    streaming = false;
    monitoring = false;
    await Promise.race([Promise.all(senders), sleep(60_000)]);
    await monitor;
    await Promise.all(workers.map((w) => w.stop()));
    await Promise.all(ingresses.map((i) => i.stop()));
    await admin?.disconnect().catch(() => {});
    await db?.pool.end();
    await own?.destroy();
    await cluster.stop();
    cluster.wipe();
  }, 180_000);

  /** One provider: its own resources, one event at a time, each retried (same bytes) until a 2xx. */
  async function provider(s: number): Promise<void> {
    const own = Array.from({ length: Math.ceil(RESOURCES / SENDERS) }, (_, i) => `cf_r${s + SENDERS * i}`).filter(
      (_, i) => s + SENDERS * i < RESOURCES,
    );
    for (let n = 0; streaming; n += 1) {
      const resource = own[n % own.length]!;
      const version = (versions.get(resource) ?? 0) + 1;
      versions.set(resource, version);
      const request = signedRequest({
        source: 'demo',
        secret: devEnv.DEMO_SECRET!,
        event: { tenant_id: TENANT, resource: { id: resource, version } },
      });
      // A provider that never got its 2xx goes on trying past the end of the load, for a while.
      await deliver(s + n, request, { resource, version }, () => streaming || Date.now() < stopAt + 60_000);
      await sleep(PACE_MS);
    }
  }

  let stopAt = Infinity;

  /** Sends until a 2xx, switching ingress after a refused or dropped connection or a 503. */
  async function deliver(
    first: number,
    request: SignedRequest,
    event: { resource: string; version: number },
    goOn: () => boolean,
  ): Promise<boolean> {
    for (let attempt = 0; goOn(); attempt += 1) {
      const i = (first + attempt) % ingresses.length;
      const sentAt = Date.now();
      const answer = await Promise.race([
        post(ingresses[i]!.url, request).catch((e: Error) => e),
        sleep(30_000).then(() => new Error('no answer within 30 s')),
      ]);
      const record = answerRecord(sentAt, answer, { eventId: request.eventId, ...event });
      log.record(record);
      attempts.push({
        ingress: i,
        sentAt,
        answeredAt: record.answeredAt,
        status: record.status,
        ...(record.error ? { error: record.error } : {}),
      });
      if (record.status >= 200 && record.status < 300) {
        accepted.set(request.eventId, event);
        return true;
      }
      await sleep(record.status === 0 ? 20 : 200);
    }
    return false;
  }

  /** Committed offsets of the group, every half second: a zombie's late commit would step them back. */
  async function watchCommits(): Promise<void> {
    while (monitoring) {
      try {
        const [committed] = await admin.fetchOffsets({ groupId, topics: [names.events] });
        for (const p of committed?.partitions ?? []) {
          const offset = Number(p.offset);
          if (offset < 0) continue;
          const max = committedMax.get(p.partition) ?? -1;
          if (offset < max) committedBack.push(`partition ${p.partition}: committed ${max}, then ${offset}`);
          committedMax.set(p.partition, Math.max(max, offset));
        }
      } catch {
        // a broker restarting: the next sample
      }
      await sleep(500);
    }
  }

  async function publishedBy(w: WorkerProcess): Promise<number | undefined> {
    try {
      return metricSum(await w.metrics(), 'webhook_applied_published_total');
    } catch {
      return undefined;
    }
  }

  /** The worker whose relay publishes (its published counter grows; only the leader publishes). */
  async function relayLeader(): Promise<WorkerProcess> {
    return eventually(
      async () => {
        const before = await Promise.all(workers.map(publishedBy));
        await sleep(1_500);
        const after = await Promise.all(workers.map(publishedBy));
        const growing = workers.filter((_, i) => before[i] !== undefined && after[i] !== undefined && after[i]! > before[i]!);
        return growing.length === 1 ? growing[0] : undefined;
      },
      { timeoutMs: 60_000, message: 'a relay leader publishing' },
    );
  }

  /** Every partition of every topic, internal ones too, led and with all three replicas in sync. */
  async function fullIsr(): Promise<boolean> {
    try {
      const { topics } = await admin.fetchTopicMetadata();
      return topics.every((t) => t.partitions.every((p) => p.leader >= 0 && p.isr.length === 3));
    } catch {
      return false;
    }
  }

  /** The broker leading the most partitions, over every topic. */
  async function busiestBroker(): Promise<{ node: number; leads: number; of: number }> {
    const { topics } = await admin.fetchTopicMetadata();
    const leads = new Map<number, number>();
    let of = 0;
    for (const t of topics)
      for (const p of t.partitions) {
        of += 1;
        leads.set(p.leader, (leads.get(p.leader) ?? 0) + 1);
      }
    const [node, count] = [...leads].sort((a, b) => b[1] - a[1])[0]!;
    return { node, leads: count, of };
  }

  async function flowing(what: string, more = 100): Promise<void> {
    const before = accepted.size;
    await eventually(async () => accepted.size >= before + more, { timeoutMs: 120_000, message: `${what}: load flowing` });
  }

  async function killBroker(label: string): Promise<string> {
    const busiest = await busiestBroker();
    const window = log.open(`${label}: broker ${busiest.node} SIGKILL`);
    const at = accepted.size;
    await cluster.stopNode(busiest.node, 'SIGKILL');
    const killedAt = Date.now();
    await sleep(BROKER_DOWN_MS);
    await cluster.startNode(busiest.node, 120_000);
    log.close(window);
    return `broker ${busiest.node} (led ${busiest.leads} of ${busiest.of} partitions) down ${((Date.now() - killedAt) / 1000).toFixed(1)} s, ${accepted.size - at} accepted meanwhile`;
  }

  /** An ingress SIGKILLed while a request is half sent to it (and others are in flight); restarted by its supervisor. */
  async function killIngressMidRequest(label: string, i: number): Promise<string> {
    const ingress = ingresses[i]!;
    const request = signedRequest({
      source: 'demo',
      secret: devEnv.DEMO_SECRET!,
      event: { tenant_id: TENANT, resource: { id: `cf_mid_${label.replace(/\W/g, '')}`, version: 1 } },
    });
    const socket = net.connect({ host: '127.0.0.1', port: ingress.port });
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    let answer = '';
    socket.on('data', (c: Buffer) => (answer += c.toString()));
    socket.on('error', () => {});
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(
      [
        `POST ${request.path} HTTP/1.1`,
        'host: 127.0.0.1',
        ...request.headers.map(([k, v]) => `${k}: ${v}`),
        `content-length: ${request.body.length}`,
        '',
        '',
      ].join('\r\n'),
    );
    socket.write(request.body.subarray(0, request.body.length >> 1));
    await sleep(100);
    const window = log.open(`${label}: ${ingress.name} SIGKILL`);
    await ingress.kill();
    await closed;
    expect(answer, 'a request cut by the kill gets no answer').toBe('');
    // The provider sends it again to the other ingress.
    versions.set(`cf_mid_${label.replace(/\W/g, '')}`, 1);
    const other = (i + 1) % ingresses.length;
    expect(await deliver(other, request, { resource: `cf_mid_${label.replace(/\W/g, '')}`, version: 1 }, () => true)).toBe(true);
    await sleep(2_000);
    await ingress.start();
    log.close(window);
    const dropped = attempts.filter((a) => a.ingress === i && a.status === 0 && a.answeredAt >= window.start).length;
    return `${ingress.name} killed with a request half sent and ${dropped} dropped or refused, back in ${((Date.now() - window.start) / 1000).toFixed(1)} s`;
  }

  async function killWorker(label: string, worker: WorkerProcess, what: string): Promise<string> {
    const window = log.open(`${label}: ${what} SIGKILL`);
    await worker.kill();
    await worker.waitReady(120_000);
    log.close(window);
    return `${what} (worker ${workers.indexOf(worker) + 1}) killed, back in ${((Date.now() - window.start) / 1000).toFixed(1)} s`;
  }

  async function groupMembers(): Promise<number> {
    const { groups } = await admin.describeGroups([groupId]);
    return groups[0]?.state === 'Stable' ? groups[0].members.length : -1;
  }

  /**
   * The relay leader frozen past its session timeout (its partitions move) and past the leader's
   * idle timeout (another worker takes the relay), then woken: a zombie, whose late offset
   * commits the group refuses and whose late sends the new leader's epoch fences.
   */
  async function freezeLeader(label: string, zombie: WorkerProcess, ms: number, problems: string[]): Promise<string> {
    const window = log.open(`${label}: relay leader SIGSTOP`);
    zombie.freeze();
    const frozenAt = Date.now();
    const others = workers.filter((w) => w !== zombie);
    await eventually(async () => (await groupMembers()) === 2, {
      timeoutMs: ms + 30_000,
      message: `${label}: partitions moved off the frozen worker`,
    });
    const moved = Date.now() - frozenAt;
    await eventually(
      async () => {
        const before = await Promise.all(others.map(publishedBy));
        await sleep(1_000);
        const after = await Promise.all(others.map(publishedBy));
        return others.some((_, i) => (after[i] ?? 0) > (before[i] ?? 0));
      },
      { timeoutMs: ms + 30_000, message: `${label}: another worker leads the relay` },
    );
    const relayMoved = Date.now() - frozenAt;
    await sleep(Math.max(0, ms - (Date.now() - frozenAt)));
    zombie.thaw();
    // Whatever the zombie had in flight ends (refused, fenced) within a moment of waking; from
    // then on it publishes nothing, as another worker leads the relay.
    await sleep(2_000);
    const afterWake = await publishedBy(zombie);
    await sleep(10_000);
    const later = await publishedBy(zombie);
    if (afterWake !== later)
      problems.push(`${label}: the woken zombie published ${later! - afterWake!} records while another worker led the relay`);
    await zombie.waitReady(120_000);
    await eventually(async () => (await groupMembers()) === 3, { timeoutMs: 120_000, message: `${label}: three members again` });
    log.close(window);
    return `relay leader frozen ${(ms / 1000).toFixed(0)} s: partitions moved after ${(moved / 1000).toFixed(1)} s, relay after ${(relayMoved / 1000).toFixed(1)} s, rejoined ${((Date.now() - frozenAt - ms) / 1000).toFixed(1)} s after waking`;
  }

  async function rollingRestart(label: string): Promise<string> {
    const window = log.open(`${label}: rolling restart`);
    for (const w of workers) {
      await w.restart();
      await w.waitReady(120_000);
    }
    log.close(window);
    return `rolling restart of the three workers in ${((Date.now() - window.start) / 1000).toFixed(1)} s`;
  }

  it(
    'applies every acknowledged event exactly once in order through worker, ingress and broker deaths, with no DLQ and zero lag within the bound',
    { timeout: 900_000 },
    async () => {
      const steps: string[] = [];
      const problems: string[] = [];
      const started = Date.now();
      // Progress on stderr: a run takes minutes, and a hang should say where it is.
      const step = (line: string) => {
        steps.push(line);
        console.error(`[cluster-faults] +${Math.round((Date.now() - started) / 1000)} s: ${line}`);
      };
      let diagnosed = false;
      onTestFailed(async () => {
        if (!diagnosed) console.error(`[cluster-faults] failed; what the bridge shows:\n${await diagnosis()}`);
      });
      streaming = true;
      monitoring = true;
      monitor = watchCommits();
      const startedAt = Date.now();
      senders = Array.from({ length: SENDERS }, (_, s) => provider(s));

      // One after another, each once the cluster is whole again and the load flows.
      const settle = async (what: string) => {
        await eventually(fullIsr, { timeoutMs: 120_000, message: `${what}: every replica in sync` });
        await flowing(what);
      };
      await settle('start');
      const leader = await relayLeader();
      const nonLeader = workers.find((w) => w !== leader)!;
      step(await killWorker('1', nonLeader, 'a worker'));
      await settle('1');
      step(await killWorker('2', await relayLeader(), 'the relay leader'));
      await settle('2');
      step(await freezeLeader('3', await relayLeader(), FREEZE_MS, problems));
      await settle('3');
      step(await killIngressMidRequest('4', 0));
      await settle('4');
      step(await killBroker('5'));
      await settle('5');
      step(await rollingRestart('6'));
      await settle('6');

      // Then overlapping: a broker down while the relay leader dies, an ingress dies mid-request
      // and another worker is frozen past its session; then a rolling restart while a broker is down.
      const overlapLeader = await relayLeader();
      const frozen = workers.find((w) => w !== overlapLeader)!;
      const overlap = await Promise.all([
        killBroker('7'),
        sleep(2_000).then(() => killWorker('7', overlapLeader, 'the relay leader')),
        sleep(3_000).then(() => killIngressMidRequest('7', 1)),
        sleep(4_000).then(async () => {
          const window = log.open('7: a worker SIGSTOP');
          frozen.freeze();
          await sleep(SESSION_TIMEOUT_MS + 5_000);
          frozen.thaw();
          await frozen.waitReady(120_000);
          log.close(window);
          return `a worker frozen ${(SESSION_TIMEOUT_MS + 5_000) / 1000} s`;
        }),
      ]);
      step(`overlapping: ${overlap.join(', ')}`);
      await settle('7');
      const overlap2 = await Promise.all([killBroker('8'), sleep(1_000).then(() => rollingRestart('8'))]);
      step(`overlapping: ${overlap2.join(', ')}`);
      await settle('8');
      await eventually(async () => (await groupMembers()) === 3, { timeoutMs: 120_000, message: 'three members at the end' });
      await sleep(10_000);

      // The load stops; the bridge must reach zero lag within the bound.
      streaming = false;
      stopAt = Date.now();
      await Promise.all(senders);
      const loadEnded = Date.now();
      const ids = [...accepted.keys()];
      const applied = async () => [...(await inboxRows(db.pool, TENANT, ids)).values()].filter((r) => r.status === 'applied').length;
      const zeroLag = async () => {
        if ((await applied()) !== ids.length) return false;
        if (!(await groupCaughtUp(kafka, groupId, names.events))) return false;
        for (const [i, topic] of names.retries.entries())
          if (!(await groupCaughtUp(kafka, `${groupId}.retry.${i + 1}`, topic))) return false;
        return outboxDrained(db.pool);
      };
      try {
        await eventually(zeroLag, { timeoutMs: LAG_BOUND_MS + 60_000, message: 'zero lag' });
      } catch (error) {
        problems.push(`${(error as Error).message}: ${await applied()}/${ids.length} acknowledged events applied`);
        console.error(`[cluster-faults] not at zero lag; what the bridge shows:\n${await diagnosis()}`);
        diagnosed = true;
      }
      const lagMs = Date.now() - stopAt;
      if (lagMs > LAG_BOUND_MS) problems.push(`zero lag ${lagMs} ms after the load stopped (bound ${LAG_BOUND_MS} ms)`);
      monitoring = false;
      await monitor;

      // Nothing acknowledged lost: on the events topic, and applied.
      const events = await missingFromEventsTopic(kafka, names.events, ids);
      problems.push(...events.missing.map((id) => `acknowledged ${id} is not on the events topic`));
      const rows = await inboxRows(db.pool, TENANT, ids);
      for (const [id, a] of accepted) {
        const row = rows.get(id);
        if (row?.status !== 'applied')
          problems.push(`acknowledged ${id} (${a.resource} v${a.version}) ended ${row ? `${row.status} (${row.reason})` : 'missing'}`);
      }
      const acceptedMax = new Map<string, number>();
      for (const a of accepted.values()) acceptedMax.set(a.resource, Math.max(acceptedMax.get(a.resource) ?? 0, a.version));
      const state = await resourceVersions(db.pool, TENANT);
      problems.push(...stateProblems({ accepted: acceptedMax, sent: versions, state }));
      // The applied topic: every applied event once per key in apply order (or a byte-identical
      // replay), the last equal to resource_state, nothing foreign; every 2xx settled.
      const ledger = await appliedLedger({ pool: db.pool, kafka, appliedTopic: names.applied, tenant: TENANT, accepted: ids });
      problems.push(...ledger.problems);
      // No DLQ.
      const dlq = await dlqEntries(kafka, names.dlq);
      problems.push(...dlq.map((d) => `dead-lettered: ${d.eventId} (${d.key}) reason ${d.reason}: ${d.error}`));
      // No zombie commit: the group's committed offsets never stepped back.
      problems.push(...committedBack.map((c) => `committed offset went back: ${c}`));
      // Every answer a 2xx, a 503 with Retry-After, or a dropped or refused connection to an ingress that was down.
      for (const a of log.answers) {
        if (a.status >= 200 && a.status < 300) continue;
        if (a.status === 503 && a.retryAfter) continue;
        if (a.status === 0 && ingresses.some((i) => i.wasDown(a.sentAt, a.answeredAt))) continue;
        problems.push(`answer ${a.status}${a.error ? ` (${a.error})` : ''} at +${a.sentAt - startedAt} ms for ${a.resource} v${a.version}`);
      }
      for (const w of workers) problems.push(...w.restartProblems());
      for (const i of ingresses) problems.push(...i.unexpectedExits);
      problems.push(...(await topicConfigProblems()));

      const count = (f: (a: Attempt) => boolean) => attempts.filter(f).length;
      const figures = {
        requests: attempts.length,
        '2xx': count((a) => a.status >= 200 && a.status < 300),
        refused503: count((a) => a.status === 503),
        dropped: count((a) => a.status === 0),
        acknowledgedEvents: ids.length,
        applied: ledger.applied,
        appliedRecords: ledger.records,
        repeatedRecords: ledger.repeated,
        loadSeconds: Math.round((loadEnded - startedAt) / 1000),
        zeroLagMs: lagMs,
      };
      const summary = `[cluster-faults] ${steps.join('; ')}; ${log.summary()}; ${JSON.stringify(figures)}`;
      console.error(summary);
      notes.push(summary);
      expect(firstOf(problems, 15), summary).toEqual([]);
    },
  );

  /** What a stuck bridge shows: its database sessions, the relay's cursor, each worker's last words. */
  async function diagnosis(): Promise<string> {
    const parts: string[] = [];
    try {
      const { rows } = await db.pool.query(
        `SELECT pid, application_name, state, backend_xid::text, backend_xmin::text,
                round(extract(epoch FROM now() - xact_start))::int AS xact_s, left(query, 120) AS query
         FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
      );
      parts.push(`sessions: ${JSON.stringify(rows)}`);
      // The relay reads only below the cluster-wide snapshot xmin: the oldest open transactions anywhere.
      const oldest = await db.pool.query(
        `SELECT datname, pid, application_name, state, backend_xid::text, backend_xmin::text,
                round(extract(epoch FROM now() - xact_start))::int AS xact_s
         FROM pg_stat_activity WHERE backend_xid IS NOT NULL OR backend_xmin IS NOT NULL ORDER BY xact_start LIMIT 5`,
      );
      parts.push(`oldest transactions on the server: ${JSON.stringify(oldest.rows)}`);
      const locks = await db.pool.query(`SELECT pid, objid::text, granted FROM pg_locks WHERE locktype = 'advisory'`);
      parts.push(`advisory locks: ${JSON.stringify(locks.rows)}`);
      const batches = await db.pool.query(`SELECT * FROM applied_outbox_batches ORDER BY 1 DESC LIMIT 3`);
      parts.push(`last relay batches: ${JSON.stringify(batches.rows)}`);
      const newest = await db.pool.query(`SELECT id::text, tx::text FROM applied_outbox ORDER BY id DESC LIMIT 1`);
      parts.push(`newest outbox row: ${JSON.stringify(newest.rows)}`);
    } catch (error) {
      parts.push(`database: ${(error as Error).message}`);
    }
    try {
      const { groups } = await admin.describeGroups([groupId]);
      parts.push(`group: ${groups[0]?.state}, members ${JSON.stringify(groups[0]?.members.map((m) => m.clientHost + ' ' + m.memberId))}`);
    } catch (error) {
      parts.push(`group: ${(error as Error).message}`);
    }
    for (const [i, w] of workers.entries()) {
      parts.push(
        `worker ${i + 1} (pid ${w.pid}, ${w.starts} starts) published ${await publishedBy(w)}; last output:\n${w.output.slice(-5_000)}`,
      );
    }
    return parts.join('\n');
  }

  /** Replication 3 and min.insync.replicas 2 on every topic, the bridge's and the internal ones. */
  async function topicConfigProblems(): Promise<string[]> {
    const problems: string[] = [];
    const { topics } = await admin.fetchTopicMetadata();
    const internal = ['__consumer_offsets', '__transaction_state'];
    for (const name of internal) if (!topics.some((t) => t.name === name)) problems.push(`no ${name} topic`);
    for (const t of topics) if (t.partitions.some((p) => p.replicas.length !== 3)) problems.push(`${t.name}: not replicated 3 ways`);
    const bridge = [names.events, ...names.retries, names.dlq, names.applied];
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [...bridge, ...internal].map((name) => ({ type: TOPIC_RESOURCE_TYPE, name, configNames: ['min.insync.replicas'] })),
    });
    for (const r of resources) {
      const value = r.configEntries.find((c) => c.configName === 'min.insync.replicas')?.configValue;
      if (value !== '2') problems.push(`${r.resourceName}: min.insync.replicas ${value}`);
    }
    return problems;
  }
});
