import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { readFileSync } from 'node:fs';
import { inject } from 'vitest';
import { useTestDatabase } from '../kit/db.ts';
import { freePort } from '../kit/ports.ts';
import { uniqueName } from '../kit/names.ts';
import { readTopic, testKafka, topicRecordCount } from '../kit/kafka.ts';
import { send } from '../kit/ingress.ts';
import { appliedLedger, firstOf } from '../kit/ledger.ts';
import { repoRoot, portOpen } from '../kit/infra.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { adminReady } from '../kit/service.ts';

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface UpLine {
  msg: string;
  time: string;
  child?: string;
  pid?: number;
  code?: number | null;
  signal?: string | null;
  restart?: number;
  starts?: number;
  restarts?: number;
  delay_ms?: number;
  started?: Array<{ name: string; pid: number; admin_port: number }>;
}

const TERMINAL = ['applied', 'duplicate', 'duplicate_version', 'stale'];
const RESOURCES = 8;
const RATE_PER_SECOND = 30;
const TRAFFIC_MS = 20_000;
const KILL_AT_MS = 6_000;

// The issue "A bridge that heals itself": under `npm start` a worker killed with SIGKILL while
// signed traffic flows through the real ingress is restarted by the supervisor, and every
// acknowledged event still ends up applied (or a duplicate / stale), in order, with nothing lost.
describe('npm start heals itself (infra/dev/up.ts)', () => {
  const db = useTestDatabase();
  let up: ChildProcess;
  let output = '';
  const base = uniqueName('heal');
  const topics = { events: `${base}.events`, applied: `${base}.applied`, dlq: `${base}.events.dlq` };
  const ports = { public: 0, ingressAdmin: 0, workerAdmin: 0 };

  /** The supervisor's own lines (service bridge-up) among everything the services print. */
  const upLines = (): UpLine[] =>
    output
      .split('\n')
      .filter((l) => l.includes('"service":"bridge-up"'))
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as UpLine];
        } catch {
          return [];
        }
      });

  beforeAll(async () => {
    ports.public = await freePort();
    ports.ingressAdmin = await freePort();
    ports.workerAdmin = await freePort();
    up = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'infra', 'dev', 'up.ts')], {
      cwd: repoRoot,
      env: {
        ...process.env,
        KAFKA_BROKERS: inject('kafkaBrokers'),
        DATABASE_URL: db.url,
        TOPIC_EVENTS: topics.events,
        TOPIC_APPLIED: topics.applied,
        TOPIC_EVENTS_PARTITIONS: '3',
        CONSUMER_GROUP: `${base}-applier`,
        PORT: String(ports.public),
        INGRESS_ADMIN_PORT: String(ports.ingressAdmin),
        WORKER_ADMIN_PORT: String(ports.workerAdmin),
        // The services' per-request / per-event lines; the supervisor logs at info regardless.
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    up.stdout!.on('data', (d) => (output += d));
    up.stderr!.on('data', (d) => (output += d));
  });

  afterAll(async () => {
    if (up.exitCode === null && up.signalCode === null) {
      up.kill('SIGINT');
      const exited = await Promise.race([new Promise((r) => up.once('exit', r)).then(() => true), sleep(30_000).then(() => false)]);
      if (!exited) {
        for (const line of upLines()) if (line.pid && pidAlive(line.pid)) process.kill(line.pid, 'SIGKILL');
        up.kill('SIGKILL');
      }
    }
  });

  it('restarts a SIGKILLed worker under load; every acknowledged event is applied, in order, none lost', { timeout: 300_000 }, async () => {
    await eventually(async () => ((await adminReady(ports.ingressAdmin)) ? true : undefined), {
      timeoutMs: 120_000,
      intervalMs: 200,
      message: 'ingress readiness',
    });
    await eventually(async () => ((await adminReady(ports.workerAdmin)) ? true : undefined), {
      timeoutMs: 120_000,
      intervalMs: 200,
      message: 'worker readiness',
    });
    const upLine = await eventually(() => upLines().find((l) => l.started), { intervalMs: 200, message: 'the started line' });
    const firstWorkerPid = upLine.started!.find((s) => s.name === 'worker')!.pid;
    expect(firstWorkerPid).toBeGreaterThan(0);
    expect(upLines().find((l) => l.child === 'worker' && l.msg.startsWith('worker started'))?.pid).toBe(firstWorkerPid);

    // Steady signed traffic through the real ingress: RESOURCES resources, increasing versions each.
    const secret = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')).DEMO_SECRET!;
    const baseUrl = `http://127.0.0.1:${ports.public}`;
    const resourceIds = Array.from({ length: RESOURCES }, (_, i) => `thm_heal_${i}_${base.slice(-6)}`);
    const nextVersion = resourceIds.map(() => 0);
    const acked: Array<{ eventId: string; resource: number; version: number; at: number }> = [];
    const refused: Array<{ status: number | string; body: string }> = [];
    const inflight = new Set<Promise<void>>();
    const fire = (i: number) => {
      const resource = i % RESOURCES;
      const version = ++nextVersion[resource]!;
      const event = sampleThemeEvent({ resource: { type: 'theme', id: resourceIds[resource]!, version } });
      const body = Buffer.from(JSON.stringify(event));
      const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id: event.event_id });
      const p = send(baseUrl, { path: '/webhooks/demo', headers: Object.entries(headers), body })
        .then(
          (answer) => {
            if (answer.status >= 200 && answer.status < 300) acked.push({ eventId: event.event_id, resource, version, at: Date.now() });
            else refused.push({ status: answer.status, body: answer.body });
          },
          (error: unknown) => void refused.push({ status: String(error), body: '' }),
        )
        .finally(() => inflight.delete(p));
      inflight.add(p);
    };

    const t0 = Date.now();
    let sent = 0;
    let killedAt = 0;
    let readyAgainAt = 0;
    let readyWatch: Promise<void> | undefined;
    while (Date.now() - t0 < TRAFFIC_MS) {
      const due = Math.floor(((Date.now() - t0) * RATE_PER_SECOND) / 1000);
      while (sent < due) fire(sent++);
      if (!killedAt && Date.now() - t0 >= KILL_AT_MS) {
        process.kill(firstWorkerPid, 'SIGKILL');
        killedAt = Date.now();
        // The worker's admin port goes away with it; ready again once the new process joined the group.
        readyWatch = eventually(
          async () => {
            if (!(await adminReady(ports.workerAdmin))) return undefined;
            readyAgainAt = Date.now();
            return true;
          },
          { timeoutMs: 150_000, intervalMs: 250, message: "the restarted worker's readiness" },
        ).then(() => {});
      }
      await sleep(5);
    }
    const trafficEnd = Date.now();
    await Promise.all(inflight);

    // The supervisor said so: one exit (SIGKILL), one restart, with its delay.
    const exit = await eventually(() => upLines().find((l) => l.child === 'worker' && l.msg.startsWith('worker exited')), {
      intervalMs: 200,
      message: 'the exit line',
    });
    expect(exit).toMatchObject({ pid: firstWorkerPid, code: null, signal: 'SIGKILL', restart: 1, delay_ms: 1000 });
    const restarted = await eventually(() => upLines().find((l) => l.child === 'worker' && l.msg.startsWith('worker restarted')), {
      intervalMs: 200,
      message: 'the restart line',
    });
    expect(restarted).toMatchObject({ restarts: 1, starts: 2 });
    expect(restarted.pid).not.toBe(firstWorkerPid);
    expect(upLines().some((l) => l.child === 'worker' && l.msg.startsWith('restarting worker (restart 1, after 1000 ms)'))).toBe(true);
    expect(pidAlive(firstWorkerPid)).toBe(false);
    expect(pidAlive(restarted.pid!)).toBe(true);
    await readyWatch;

    // The ingress kept accepting throughout: every request acknowledged, also while no worker ran.
    expect(refused, JSON.stringify(refused.slice(0, 5))).toEqual([]);
    expect(acked.length).toBe(sent);
    const ackedWhileDown = acked.filter((a) => a.at > killedAt && a.at < readyAgainAt).length;
    expect(ackedWhileDown).toBeGreaterThan(0);

    // Every acknowledged event ends applied, or as a duplicate / stale, per its inbox row.
    const ids = acked.map((a) => a.eventId);
    const caughtUpAt = await eventually(
      async () => {
        const { rows } = await db.pool.query<{ n: string }>(
          'SELECT count(*) AS n FROM inbox_events WHERE tenant_id = $1 AND event_id = ANY($2::text[]) AND status = ANY($3::text[])',
          ['tenant_acme', ids, TERMINAL],
        );
        return Number(rows[0]!.n) === ids.length ? Date.now() : undefined;
      },
      { timeoutMs: 150_000, intervalMs: 500, message: 'every acknowledged event in the inbox' },
    );
    const { rows: inbox } = await db.pool.query<{ event_id: string; status: string }>(
      'SELECT event_id, status FROM inbox_events WHERE tenant_id = $1 AND event_id = ANY($2::text[])',
      ['tenant_acme', ids],
    );
    const statuses = new Map(inbox.map((r) => [r.event_id, r.status]));
    for (const id of ids) expect(TERMINAL, id).toContain(statuses.get(id));
    const outcomes: Record<string, number> = {};
    for (const s of statuses.values()) outcomes[s] = (outcomes[s] ?? 0) + 1;

    // Each resource's state is at its highest acknowledged version.
    const highest = resourceIds.map((_, r) => Math.max(...acked.filter((a) => a.resource === r).map((a) => a.version)));
    const { rows: state } = await db.pool.query<{ resource_id: string; version: string; deleted: boolean }>(
      'SELECT resource_id, version, deleted FROM resource_state WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = ANY($3::text[])',
      ['tenant_acme', 'theme', resourceIds],
    );
    const stateVersion = new Map(state.map((r) => [r.resource_id, Number(r.version)]));
    expect(resourceIds.map((id) => stateVersion.get(id))).toEqual(highest);

    // When did the new worker take over: its first apply transaction after the kill (Postgres's clock, same machine).
    const { rows: firstAfter } = await db.pool.query<{ t: Date | null }>(
      'SELECT min(first_seen_at) AS t FROM inbox_events WHERE tenant_id = $1 AND event_id = ANY($2::text[]) AND first_seen_at > $3',
      ['tenant_acme', ids, new Date(killedAt)],
    );

    // The applied topic: wait until each key's highest acknowledged version is there, then the
    // shared ledger: every applied event once per key in apply order (a byte-identical replay of a
    // batch allowed, whole and in order), the LAST record per key equal to the state (not the
    // highest one: compaction keeps the last), nothing foreign, every acknowledged event settled.
    const kafka = testKafka();
    const keyOf = (r: number) => `tenant_acme/theme/${resourceIds[r]}`;
    await eventually(
      async () => {
        const records = await readTopic(kafka, topics.applied);
        const seen = new Set(
          records.map((rec) => `${rec.key} ${(JSON.parse(rec.value.toString()) as { resource: { version: number } }).resource.version}`),
        );
        return resourceIds.every((_, r) => seen.has(`${keyOf(r)} ${highest[r]}`)) ? true : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 1000, message: 'the highest versions on the applied topic' },
    );
    const ledger = await appliedLedger({ pool: db.pool, kafka, appliedTopic: topics.applied, tenant: 'tenant_acme', accepted: ids });
    expect(firstOf(ledger.problems)).toEqual([]);
    const repeats = ledger.repeated;
    const appliedRecords = ledger.records;

    // Nothing dead-lettered.
    expect(await topicRecordCount(kafka, topics.dlq)).toBe(0);

    // The worker started exactly twice (the first start and the one restart); the ingress once.
    const starts = (name: string) =>
      upLines().filter((l) => l.child === name && /^(started|restarted) /.test(l.msg.slice(name.length + 1)));
    expect(starts('worker').map((l) => l.pid)).toEqual([firstWorkerPid, restarted.pid]);
    expect(starts('ingress')).toHaveLength(1);

    const figures = {
      requests: sent,
      acknowledged: acked.length,
      refused: refused.length,
      acknowledged_while_worker_down: ackedWhileDown,
      worker_starts: starts('worker').length,
      worker_restarts: restarted.restarts,
      kill_at_ms_into_traffic: killedAt - t0,
      traffic_ms: trafficEnd - t0,
      kill_to_restart_logged_ms: Date.parse(restarted.time) - killedAt,
      kill_to_worker_ready_ms: readyAgainAt - killedAt,
      kill_to_first_apply_ms: firstAfter[0]!.t ? firstAfter[0]!.t.getTime() - killedAt : null,
      kill_to_all_acknowledged_in_inbox_ms: caughtUpAt - killedAt,
      outcomes,
      applied_records: appliedRecords,
      applied_repeats: repeats,
    };
    console.log(`self-healing figures ${JSON.stringify(figures)}`);

    // Shutdown stops everything and restarts nothing.
    up.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => up.once('exit', (c) => resolve(c)));
    expect(code, output.slice(-4000)).toBe(0);
    expect(starts('worker')).toHaveLength(2);
    expect(upLines().some((l) => l.msg.startsWith('restarting') && l.restart !== 1)).toBe(false);
    expect(pidAlive(restarted.pid!)).toBe(false);
    expect(await portOpen(ports.public)).toBe(false);
    expect(await portOpen(ports.ingressAdmin)).toBe(false);
    expect(await portOpen(ports.workerAdmin)).toBe(false);
  });
});
