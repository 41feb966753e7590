// npm run bench:scale: one backlog drained by 1, 2 and 3 worker processes (services/worker/main.ts,
// from its bundle, as npm start runs it) in one consumer group, side by side: the rounds alternate
// the worker counts, so each count sees the same machine over the same minutes. Each run: a fresh
// database and a fresh group, from the beginning of one preloaded 12-partition topic.
// The rate is taken over the steady part of a run: from the first moment every worker is a member
// of the stable group and 5% is committed, to the moment 95% is. Results: bench/results/scaling.md and .json.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import type { Admin } from '#plumbing/kafka/types.ts';
import pg from 'pg';
import { buildBundles } from '../../infra/build/build.ts';
import { repoRoot } from '../../infra/paths.ts';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { migrate } from '#domain/store/migrate.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { ensureTopics, topicSpecs, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { cpuSnapshot } from '../lib/cpu.ts';
import { cpuCalibrationMs } from '../lib/machine.ts';
import { machineNow, versionsNow, writeBenchResult } from '../lib/results.ts';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { buildDataset } from './dataset.ts';
import { workerEnv } from './rounds.ts';
import { sleep } from '../../test/kit/eventually.ts';

const RESOURCES = Number(process.env.BENCH_RESOURCES ?? 6_000);
const WORKERS = (process.env.BENCH_WORKERS ?? '1,2,3').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PARTITIONS = 12;
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');
const logger = createLogger({ name: 'bench-scale', level: 'warn' });
const log = (line: string) => console.error(`[bench:scale] ${line}`);

/** Own user + system CPU seconds of one process (0 once it is gone). */
function processCpu(pid: number): number {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const loadBefore = os.loadavg();
const ranAt = new Date().toISOString();
const calibrationBefore = cpuCalibrationMs();
const postgres = await resolvePostgres(log);
const kafka = createKafka({ brokers, clientId: 'bench-scale', logger });
const stamp = Date.now().toString(36);
const settings: TopicSettings = {
  events: `bench.scale.${stamp}.events`,
  applied: `bench.scale.${stamp}.applied`,
  eventsPartitions: PARTITIONS,
  retryLevels: 4,
  replicationFactor: 1,
  minInsyncReplicas: 1,
};
const admin: Admin = kafka.admin();
await admin.connect();
await ensureTopics(admin, topicSpecs(settings), 1);
const dataset = buildDataset(RESOURCES);
const events = dataset.events.length;
log(`preloading ${events} events over ${RESOURCES} resources to ${settings.events}`);
const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
await producer.connect();
for (let i = 0; i < events; i += 5000)
  await producer.send({ topic: settings.events, acks: -1, messages: dataset.events.slice(i, i + 5000) });
await producer.disconnect();
const [workerBundle] = (await buildBundles(['services/worker/main.ts'])) as [string];

interface Run {
  workers: number;
  rate: number;
  windowSeconds: number;
  totalSeconds: number;
  /** CPU seconds per 1,000 events in the window: the workers, this run's Postgres backends, the broker. */
  cpu: { node: number; postgres: number; broker: number };
}

async function committed(groupId: string): Promise<number> {
  const [topic] = await admin.fetchOffsets({ groupId, topics: [settings.events] });
  return (topic?.partitions ?? []).reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
}

async function stableMembers(groupId: string): Promise<number> {
  const { groups } = await admin.describeGroups([groupId]);
  const group = groups[0];
  return group?.state === 'Stable' ? group.members.length : 0;
}

/** CPU of the backends connected to one database (the run's own), from /proc. */
async function backendsCpu(adminUrl: string, database: string): Promise<number> {
  const pids = await withClient(
    adminUrl,
    async (c) => (await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database])).rows,
  );
  return pids.reduce((sum, { pid }) => sum + processCpu(pid), 0);
}

async function runOnce(workers: number, label: string): Promise<Run> {
  const database = `bench_scale_${stamp}_${label}`;
  await withClient(postgres.adminUrl, (c) => c.query(`CREATE DATABASE ${database}`));
  const url = withDatabase(postgres.adminUrl, database);
  const migrator = new pg.Pool({ connectionString: url, max: 1 });
  await migrate(migrator);
  await migrator.end();
  const groupId = `bench-scale-${stamp}-${label}`;
  const children: ChildProcess[] = [];
  const started = performance.now();
  for (let i = 0; i < workers; i += 1) {
    const child = spawn(process.execPath, [...serviceSpecs.worker.nodeArgs, workerBundle], {
      cwd: repoRoot,
      env: {
        ...process.env,
        ...workerEnv({ brokers, databaseUrl: url, settings, groupId }),
        KAFKA_CLIENT_ID: `bench-scale-worker-${i}`,
        ADMIN_PORT: String(await freePort()),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
  }
  let window: { t: number; done: number; cpu: { node: number; postgres: number; broker: number } } | undefined;
  let end: typeof window;
  const cpuNow = async () => ({
    node: children.reduce((sum, c) => sum + processCpu(c.pid!), 0),
    postgres: await backendsCpu(postgres.adminUrl, database),
    broker: cpuSnapshot().kafka,
  });
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error(`${workers} workers: not drained within 15 minutes`);
    const exited = children.find((c) => c.exitCode !== null || c.signalCode !== null);
    if (exited) throw new Error(`a worker exited (${exited.exitCode ?? exited.signalCode}) during the run`);
    const done = await committed(groupId);
    if (window === undefined && done >= events * 0.05 && (await stableMembers(groupId)) === workers)
      window = { t: performance.now(), done, cpu: await cpuNow() };
    if (window !== undefined && end === undefined && done >= events * 0.95) end = { t: performance.now(), done, cpu: await cpuNow() };
    if (done >= events) break;
    await sleep(200);
  }
  const totalSeconds = (performance.now() - started) / 1000;
  await Promise.all(
    children.map(async (c) => {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    }),
  );
  await withClient(postgres.adminUrl, (c) => c.query(`DROP DATABASE ${database} WITH (FORCE)`));
  if (window === undefined || end === undefined) throw new Error(`${workers} workers: the group never held all its members in the window`);
  const seconds = (end.t - window.t) / 1000;
  const n = end.done - window.done;
  const per1000 = (a: number, b: number) => ((b - a) / n) * 1000;
  const run = {
    workers,
    rate: n / seconds,
    windowSeconds: seconds,
    totalSeconds,
    cpu: {
      node: per1000(window.cpu.node, end.cpu.node),
      postgres: per1000(window.cpu.postgres, end.cpu.postgres),
      broker: per1000(window.cpu.broker, end.cpu.broker),
    },
  };
  log(
    `${label}: ${workers} worker(s) ${Math.round(run.rate)} events/s over ${seconds.toFixed(1)} s (whole run ${totalSeconds.toFixed(1)} s)`,
  );
  return run;
}

const runs: Run[] = [];
for (let round = 1; round <= ROUNDS; round += 1) {
  for (const workers of WORKERS) runs.push(await runOnce(workers, `r${round}_w${workers}`));
}
await admin.deleteTopics({ topics: topicSpecs(settings).map((t) => t.name) }).catch(() => {});
await admin.disconnect();
const pgVersion = await withClient(
  postgres.adminUrl,
  async (c) => (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version,
);
await postgres.stop();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const rows = WORKERS.map((w) => {
  const mine = runs.filter((r) => r.workers === w);
  const rate = median(mine.map((r) => r.rate));
  return {
    w,
    rounds: mine.map((r) => Math.round(r.rate).toLocaleString('en')).join(', '),
    rate,
    node: median(mine.map((r) => r.cpu.node)),
    postgres: median(mine.map((r) => r.cpu.postgres)),
    broker: median(mine.map((r) => r.cpu.broker)),
  };
});
const base = rows[0]!.rate;
const calibrationAfter = cpuCalibrationMs();
const report = `# Scaling benchmark: 1, 2 and 3 workers

Command: \`npm run bench:scale\` (bench/worker/scale.ts). Run: ${new Date().toISOString()}.
Machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'unknown CPU'}; the broker, Postgres (${postgres.origin}) and every worker share it.
CPU calibration (bench/lib/machine.ts, lower is faster): before ${calibrationBefore} ms, after ${calibrationAfter} ms.
Load average (1 min) before: ${loadBefore[0]!.toFixed(1)}, after: ${os.loadavg()[0]!.toFixed(1)}: other work ran on the machine when these are well above the run's own.

Workload: ${events.toLocaleString('en')} events over ${RESOURCES.toLocaleString('en')} resources (10% redeliveries, 10% stale; bench/worker/dataset.ts),
preloaded to one ${PARTITIONS}-partition topic; each run drains it with N worker processes in a fresh group into a fresh database, at
the worker's default settings. Rate: events committed per second between 5% and 95% of the backlog, once all N are
members of the stable group. CPU: seconds per 1,000 events in that window, of the worker processes, of the run's own
Postgres backends (WAL writer and checkpointer not included), and of the broker (which served other work too).

| workers | events/s, median | per round | vs 1 worker | node CPU s / 1k events | Postgres backends | broker |
|---:|---:|---|---:|---:|---:|---:|
${rows.map((r) => `| ${r.w} | **${Math.round(r.rate).toLocaleString('en')}** | ${r.rounds} | ${((r.rate / base) * 100).toFixed(0)}% | ${r.node.toFixed(2)} | ${r.postgres.toFixed(2)} | ${r.broker.toFixed(2)} |`).join('\n')}
`;
const resultsFile = path.join(repoRoot, 'bench/results/scaling.md');
await mkdir(path.dirname(resultsFile), { recursive: true });
await writeFile(resultsFile, report);
writeBenchResult({
  name: 'scaling',
  command: 'npm run bench:scale',
  ranAt,
  machine: machineNow(loadBefore[0]),
  calibrationMs: { before: calibrationBefore, after: calibrationAfter },
  versions: versionsNow({ kafka: KAFKA_VERSION, postgres: pgVersion }),
  settings: { events, resources: RESOURCES, partitions: PARTITIONS, workers: WORKERS, rounds: ROUNDS },
  rounds: runs.map((r, i) => ({
    round: Math.floor(i / WORKERS.length) + 1,
    workers: r.workers,
    eventsPerSecond: r.rate,
    windowSeconds: r.windowSeconds,
    cpuSecondsPer1kEvents: r.cpu,
  })),
  summary: WORKERS.map((w) => ({
    label: `${w} worker${w === 1 ? '' : 's'}`,
    unit: 'events/s',
    values: runs.filter((r) => r.workers === w).map((r) => r.rate),
  })),
});
console.log(report);
