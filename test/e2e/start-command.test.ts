import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { readFileSync } from 'node:fs';
import { inject } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../kit/db.ts';
import { freePort } from '../kit/ports.ts';
import { uniqueName } from '../kit/names.ts';
import { testKafka, testBrokers } from '../kit/kafka.ts';
import { repoRoot, portOpen } from '../kit/infra.ts';
import { brokerReady } from '#plumbing/kafka/client.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { eventually } from '../kit/eventually.ts';
import { runBridge } from '../kit/run-bridge.ts';

// The README's start command, end to end: topics, migrations, ingress and worker from one process;
// a signed webhook becomes state and an applied record; Ctrl-C stops the services and nothing else.
describe('npm start (infra/dev/up.ts)', () => {
  let db: TestDatabase;
  let up: ChildProcess;
  let output = '';
  const base = uniqueName('up');
  const ports = { public: 0, ingressAdmin: 0, workerAdmin: 0 };

  beforeAll(async () => {
    db = await createTestDatabase();
    ports.public = await freePort();
    ports.ingressAdmin = await freePort();
    ports.workerAdmin = await freePort();
    up = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'infra', 'dev', 'up.ts')], {
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
    await eventually(
      async () => {
        const res = await fetch(`http://127.0.0.1:${ports.ingressAdmin}/readyz`);
        return res.ok ? true : undefined;
      },
      { intervalMs: 200, message: 'ingress readiness' },
    );
    await eventually(
      async () => {
        const res = await fetch(`http://127.0.0.1:${ports.workerAdmin}/readyz`);
        return res.ok ? true : undefined;
      },
      { intervalMs: 200, message: 'worker readiness' },
    );

    const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8'));
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
    const dry = await runBridge(['sources', 'apply', '--dry-run', '-f', 'infra/dev/dev-sources.json'], {
      ...(devEnv as Record<string, string>),
      DATABASE_URL: db.url,
    });
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('no change (5 source(s) unchanged)');

    up.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => up.once('exit', (c) => resolve(c)));
    expect(code, output).toBe(0);
    expect(await portOpen(ports.public)).toBe(false);
    expect(await portOpen(ports.ingressAdmin)).toBe(false);
    expect(await portOpen(ports.workerAdmin)).toBe(false);
    // It used KAFKA_BROKERS, so it started no broker and must have stopped none.
    expect(await brokerReady(testBrokers())).toBe(true);
  });
});
