import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { readFileSync } from 'node:fs';
import { inject } from 'vitest';
import { useTestDatabase } from '../kit/db.ts';
import { freePort } from '../kit/ports.ts';
import { uniqueName } from '../kit/names.ts';
import { testKafka } from '../kit/kafka.ts';
import { send } from '../kit/ingress.ts';
import { repoRoot, portOpen } from '../kit/infra.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { adminReady } from '../kit/service.ts';

interface Service {
  process: ChildProcess;
  output: () => string;
  exit: Promise<number | null>;
}

// `npm run ingress` / `npm run worker` (infra/dev/service.ts): each service in its own process, two
// workers in one consumer group, each finding its own admin port; a worker stopped, the other
// takes over; each command exits with its service's status.
describe('the services run apart (infra/dev/service.ts)', () => {
  const db = useTestDatabase();
  const services: Service[] = [];
  const base = uniqueName('apart');
  const group = `${base}-applier`;
  const ports = { public: 0, ingressAdmin: 0 };

  function start(kind: 'ingress' | 'worker', extra: Record<string, string>): Service {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KAFKA_BROKERS: inject('kafkaBrokers'),
      TOPIC_EVENTS: `${base}.events`,
      TOPIC_APPLIED: `${base}.applied`,
      TOPIC_EVENTS_PARTITIONS: '4',
      CONSUMER_GROUP: group,
      LOG_LEVEL: 'warn',
      ...extra,
    };
    // The ingress needs no database; the workers find their own admin ports.
    if (kind === 'ingress') delete env.DATABASE_URL;
    else delete env.ADMIN_PORT;
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'infra', 'dev', 'service.ts'), kind], {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const service = {
      process: child,
      output: () => output,
      exit: new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
    };
    services.push(service);
    return service;
  }

  /** The admin port the worker's command chose, from its `worker started` line. */
  const adminPortOf = (s: Service) =>
    eventually(
      () => {
        const line = s
          .output()
          .split('\n')
          .find((l) => l.includes('"service":"run-worker"') && l.includes('worker started'));
        return line ? (JSON.parse(line) as { admin_port: number }).admin_port : undefined;
      },
      { intervalMs: 250, message: 'the worker started line' },
    );

  beforeAll(async () => {
    ports.public = await freePort();
    ports.ingressAdmin = await freePort();
  });

  afterAll(async () => {
    for (const s of services) if (s.process.exitCode === null && s.process.signalCode === null) s.process.kill('SIGINT');
    await Promise.race([Promise.all(services.map((s) => s.exit)), sleep(30_000)]);
    for (const s of services) if (s.process.exitCode === null && s.process.signalCode === null) s.process.kill('SIGKILL');
  });

  it('an ingress and two workers in one group, each its own process', { timeout: 240_000 }, async () => {
    const ingress = start('ingress', { PORT: String(ports.public), ADMIN_PORT: String(ports.ingressAdmin) });
    // Started at the same moment: the claim files keep their admin ports apart.
    const workers = [start('worker', { DATABASE_URL: db.url }), start('worker', { DATABASE_URL: db.url })];
    const workerPorts = await Promise.all(workers.map(adminPortOf));
    expect(new Set(workerPorts).size).toBe(2);
    await eventually(async () => ((await adminReady(ports.ingressAdmin)) ? true : undefined), {
      timeoutMs: 120_000,
      intervalMs: 250,
      message: 'ingress readiness',
    });
    for (const port of workerPorts)
      await eventually(async () => ((await adminReady(port)) ? true : undefined), {
        timeoutMs: 120_000,
        intervalMs: 250,
        message: `worker readiness on ${port}`,
      });

    const kafka = testKafka();
    const admin = kafka.admin();
    await admin.connect();
    const members = await eventually(
      async () => {
        const { groups } = await admin.describeGroups([group]);
        const g = groups[0]!;
        return g.state === 'Stable' && g.members.length === 2 ? g.members : undefined;
      },
      { intervalMs: 250, message: 'two members in the group' },
    );
    expect(members).toHaveLength(2);

    const secret = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')).DEMO_SECRET!;
    const resources = Array.from({ length: 6 }, (_, i) => `thm_apart_${i}_${base.slice(-6)}`);
    const versions = resources.map(() => 0);
    const sendRound = async () => {
      for (let round = 0; round < 5; round += 1) {
        await Promise.all(
          resources.map(async (id, r) => {
            const event = sampleThemeEvent({ resource: { type: 'theme', id, version: ++versions[r]! } });
            const body = Buffer.from(JSON.stringify(event));
            const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id: event.event_id });
            const answer = await send(`http://127.0.0.1:${ports.public}`, {
              path: '/webhooks/demo',
              headers: Object.entries(headers),
              body,
            });
            expect(answer.status, answer.body).toBe(202);
          }),
        );
      }
    };
    const stateAtHighest = () =>
      eventually(
        async () => {
          const { rows } = await db.pool.query<{ resource_id: string; version: string }>(
            'SELECT resource_id, version FROM resource_state WHERE tenant_id = $1 AND resource_id = ANY($2::text[])',
            ['tenant_acme', resources],
          );
          const got = new Map(rows.map((row) => [row.resource_id, Number(row.version)]));
          return resources.every((id, r) => got.get(id) === versions[r]) ? true : undefined;
        },
        { intervalMs: 250, message: 'every resource at its highest version' },
      );

    await sendRound();
    await stateAtHighest();

    // One worker stopped (SIGTERM to its command): it leaves the group and exits 0; the other takes over.
    workers[0]!.process.kill('SIGTERM');
    expect(await workers[0]!.exit, workers[0]!.output().slice(-2000)).toBe(0);
    expect(await portOpen(workerPorts[0]!)).toBe(false);
    await sendRound();
    await stateAtHighest();
    const { groups } = await admin.describeGroups([group]);
    expect(groups[0]!.members).toHaveLength(1);
    await admin.disconnect();

    for (const s of [ingress, workers[1]!]) s.process.kill('SIGINT');
    expect(await ingress.exit, ingress.output().slice(-2000)).toBe(0);
    expect(await workers[1]!.exit, workers[1]!.output().slice(-2000)).toBe(0);
    expect(await portOpen(ports.public)).toBe(false);
    expect(await portOpen(workerPorts[1]!)).toBe(false);
  });
});
