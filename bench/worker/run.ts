// npm run bench:worker: 200,000 events over 20,000 resources (10% duplicates, 10% stale) preloaded
// to a fresh topic; the worker is timed from its first fetched batch to its last offset commit.
// The ceiling drives the same apply path (same SQL, same batch size, same parallelism) straight
// at Postgres with a plain pg pool, no Kafka. Results go to bench/results/worker.md and .json.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import pg from 'pg';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { repoRoot } from '../../infra/paths.ts';
import { buildBundles } from '../../infra/build/build.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { migrate } from '#domain/store/migrate.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { ensureTopics, topicNames, topicSpecs, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { cpuSince, cpuSnapshot, type CpuSnapshot } from '../lib/cpu.ts';
import { cpuCalibrationMs } from '../lib/machine.ts';
import { machineNow, versionsNow, writeBenchResult } from '../lib/results.ts';
import { buildDataset } from './dataset.ts';
import { planCopyCeiling } from './copy-plan.ts';
import { copyCeilingReport } from './copy-report.ts';
import { runCopyCeiling, type CopyCeilingRound } from './copy-write.ts';

const RESOURCES = Number(process.env.BENCH_RESOURCES ?? 20_000);
// Defaults are the worker's production defaults (services/worker/config.ts).
const BATCH_SIZE = Number(process.env.BENCH_BATCH_SIZE ?? 1000);
const MAX_BYTES_PER_PARTITION = Number(process.env.BENCH_MAX_BYTES_PER_PARTITION ?? 1_048_576);
// The worker process runs with npm start's Node flags (infra/dev/services.ts); BENCH_SEMI_SPACE_MB
// replaces its young-generation size.
const SEMI_SPACE_MB = process.env.BENCH_SEMI_SPACE_MB === undefined ? undefined : Number(process.env.BENCH_SEMI_SPACE_MB);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 12);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PARTITIONS = 12;
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');
const logger = createLogger({ name: 'bench-worker', level: 'warn' });
const log = (line: string) => console.error(`[bench:worker] ${line}`);

async function freshDatabase(adminUrl: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  await migrate(pool);
  await pool.end();
  return url;
}

async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
}

async function tableCounts(url: string) {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const { rows } = await pool.query(
    `SELECT (SELECT count(*)::int FROM resource_state) AS resources,
            (SELECT count(*)::int FROM inbox_events) AS inbox,
            (SELECT count(*)::int FROM applied_outbox) AS outbox`,
  );
  await pool.end();
  return rows[0] as { resources: number; inbox: number; outbox: number };
}

const loadBefore = os.loadavg();
const ranAt = new Date().toISOString();
const calibrationBefore = cpuCalibrationMs();
const postgres = await resolvePostgres(log);
const kafka = createKafka({ brokers, clientId: 'bench-worker', logger });
const stamp = Date.now().toString(36);
const settings: TopicSettings = {
  events: `bench.worker.${stamp}.events`,
  applied: `bench.worker.${stamp}.applied`,
  eventsPartitions: PARTITIONS,
  retryLevels: 4,
  replicationFactor: 1,
  minInsyncReplicas: 1,
};
const admin = kafka.admin();
await admin.connect();
await ensureTopics(admin, topicSpecs(settings), 1);

const dataset = buildDataset(RESOURCES);
log(`preloading ${dataset.events.length} events over ${RESOURCES} resources to ${settings.events}`);
const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
await producer.connect();
const preloadStart = performance.now();
for (let i = 0; i < dataset.events.length; i += 5000) {
  await producer.send({ topic: settings.events, acks: -1, messages: dataset.events.slice(i, i + 5000) });
}
await producer.disconnect();
log(`preloaded in ${((performance.now() - preloadStart) / 1000).toFixed(1)} s`);
const ends = Object.fromEntries((await admin.fetchTopicOffsets(settings.events)).map((o) => [o.partition, Number(o.high)]));
const partitionOf = new Map<string, number>();
{
  // The ceiling feeds each partition's records in the same order the worker sees them.
  const reader = kafka.consumer({ groupId: `bench-reader-${stamp}` });
  await reader.connect();
  await reader.subscribe({ topics: [settings.events], fromBeginning: true });
  let seen = 0;
  await new Promise<void>((resolve) => {
    void reader.run({
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) partitionOf.set(m.key!.toString(), batch.partition);
        seen += batch.messages.length;
        if (seen >= dataset.events.length) resolve();
      },
    });
  });
  await reader.disconnect();
}
await admin.disconnect();

// BENCH_WORKER_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", profiles the worker process.
const nodeArgs = [
  ...serviceSpecs.worker.nodeArgs.filter((a) => SEMI_SPACE_MB === undefined || !a.startsWith('--max-semi-space-size=')),
  ...(SEMI_SPACE_MB === undefined ? [] : [`--max-semi-space-size=${SEMI_SPACE_MB}`]),
  ...(process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter((a) => a.length > 0),
];
const events = dataset.events.length;
// The worker child runs as the services do, from an esbuild bundle (infra/build/build.ts); BENCH_WORKER_FROM=source
// runs it through tsx's loader instead.
const WORKER_FROM = process.env.BENCH_WORKER_FROM === 'source' ? 'source' : 'bundle';
const workerChildEntry =
  WORKER_FROM === 'source'
    ? ['--import', 'tsx', path.join(repoRoot, 'bench/worker/worker-child.ts')]
    : await buildBundles(['bench/worker/worker-child.ts']);

interface WorkerRound {
  consumedMs: number;
  drainedMs: number;
  rssAtCommitMb: number;
  peakRssMb: number;
  outcomes: Record<string, number>;
  counts: Awaited<ReturnType<typeof tableCounts>>;
  cpu: CpuSnapshot | undefined;
  rate: number;
}

/** One worker process in its own consumer group, from the beginning of the topic, into a fresh database. */
async function runWorker(round: number, extraEnv: Record<string, string> = {}): Promise<WorkerRound> {
  const database = `bench_worker_${stamp}_${round}`;
  const url = await freshDatabase(postgres.adminUrl, database);
  log(`round ${round}: running the worker`);
  const { BENCH_NODE_ARGS: extraNodeArgs, ...childEnv } = extraEnv;
  const args = [...nodeArgs, ...(extraNodeArgs ?? '').split(',').filter((a) => a.length > 0), ...workerChildEntry];
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: {
      ...process.env,
      KAFKA_BROKERS: brokers.join(','),
      DATABASE_URL: url,
      TOPIC_EVENTS: settings.events,
      TOPIC_APPLIED: settings.applied,
      TOPIC_RETRY_LEVELS: String(topicNames(settings).retries.length),
      CONSUMER_GROUP: `bench-applier-${stamp}-${round}`,
      WORKER_BATCH_SIZE: String(BATCH_SIZE),
      WORKER_MAX_BYTES_PER_PARTITION: String(MAX_BYTES_PER_PARTITION),
      WORKER_PARTITIONS_CONCURRENCY: String(CONCURRENCY),
      LOG_LEVEL: 'info',
      BENCH_END_OFFSETS: JSON.stringify(ends),
      ...childEnv,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let childOut = '';
  const marks = new Map<string, { own: number; at: CpuSnapshot }>();
  let pending = '';
  child.stdout.on('data', (d: Buffer) => {
    childOut += d.toString();
    pending += d.toString();
    for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (!line.startsWith('{"event"')) continue;
      const m = JSON.parse(line) as { event: string; cpuSeconds: number };
      marks.set(m.event, { own: m.cpuSeconds, at: cpuSnapshot() });
    }
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`worker child exited ${code}: ${childOut}`);
  if (process.env.BENCH_CHILD_STDOUT) writeFileSync(process.env.BENCH_CHILD_STDOUT, childOut);
  const run = JSON.parse(childOut.trim().split('\n').at(-1)!) as Omit<WorkerRound, 'counts' | 'cpu' | 'rate'>;
  const counts = await tableCounts(url);
  const first = marks.get('first-fetch');
  const last = marks.get('last-commit');
  const cpu = first && last ? { ...cpuSince(first.at, last.at), child: last.own - first.own } : undefined;
  if (process.env.BENCH_KEEP !== '1') await dropDatabase(postgres.adminUrl, database);
  const rate = events / (run.consumedMs / 1000);
  log(`round ${round}: worker ${Math.round(rate)} events/s`);
  return { ...run, counts, cpu, rate };
}

// The ceiling: same apply path, no Kafka. Each lane feeds a partition's records in offset order.
const lanes: SourceRecord[][][] = Array.from({ length: PARTITIONS }, () => []);
{
  const perPartition: SourceRecord[][] = Array.from({ length: PARTITIONS }, () => []);
  const now = String(Date.now());
  for (const e of dataset.events) {
    const partition = partitionOf.get(e.key)!;
    const list = perPartition[partition]!;
    list.push({
      topic: settings.events,
      partition,
      offset: String(list.length),
      key: e.key,
      value: Buffer.from(e.value),
      timestamp: now,
      headers: {},
    });
  }
  perPartition.forEach((records, p) => {
    for (let i = 0; i < records.length; i += BATCH_SIZE) lanes[p]!.push(records.slice(i, i + BATCH_SIZE));
  });
}

interface CeilingRound {
  ms: number;
  cpu: CpuSnapshot;
  counts: Awaited<ReturnType<typeof tableCounts>>;
  rate: number;
}

async function runCeiling(round: number): Promise<CeilingRound> {
  const database = `bench_ceiling_${stamp}_${round}`;
  const url = await freshDatabase(postgres.adminUrl, database);
  log(`round ${round}: running the ceiling (apply path straight at Postgres)`);
  const ceilingPool = createPool({ url, max: 10, applicationName: 'bench-ceiling' });
  const applier = new SnapshotApplier({ pool: ceilingPool });
  const queue = lanes.map((chunks, p) => ({ p, chunks }));
  const cpuBefore = cpuSnapshot();
  const ownBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) for (const chunk of next.chunks) await applier.applyBatch(chunk);
    }),
  );
  const ms = performance.now() - started;
  const own = process.cpuUsage(ownBefore);
  const cpu = { ...cpuSince(cpuBefore, cpuSnapshot()), child: (own.user + own.system) / 1e6 };
  await ceilingPool.end();
  const counts = await tableCounts(url);
  if (process.env.BENCH_KEEP !== '1') await dropDatabase(postgres.adminUrl, database);
  const rate = events / (ms / 1000);
  log(`round ${round}: ceiling ${Math.round(rate)} events/s`);
  return { ms, cpu, counts, rate };
}

// Rounds alternate worker and ceiling, so both see the same machine over the same minutes; the
// report takes medians (these 2-core machines are noisy).
const rounds: Array<{ worker: WorkerRound; ceiling: CeilingRound }> = [];
// The COPY ceiling (bench/worker/copy-ceiling.ts): the same rows, COPYed; a third run in each round.
// BENCH_AB_ENV="NAME=value ...": an A/B of worker runs only, alternating without (A) and with (B)
// that environment in the child (BENCH_NODE_ARGS=a,b adds Node flags), A B, B A, ... so both see
// the same minutes of the machine. Prints one line per run and writes no results file.
if (process.env.BENCH_AB_ENV !== undefined) {
  const withB = Object.fromEntries(
    process.env.BENCH_AB_ENV.split(' ')
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const us = (seconds: number) => `${((seconds / events) * 1e6).toFixed(1)} us`;
  for (let round = 1; round <= ROUNDS; round += 1) {
    const order: Array<['A' | 'B', Record<string, string>]> = [
      ['A', {}],
      ['B', withB],
    ];
    for (const [arm, env] of round % 2 === 1 ? order : order.reverse()) {
      const w = await runWorker(round * 10 + (arm === 'A' ? 1 : 2), env);
      const c = w.cpu;
      console.log(
        `${arm} round ${round}: ${Math.round(w.rate)} events/s to the last commit, ${Math.round(events / (w.drainedMs / 1000))} events/s published; ` +
          `CPU per event: node ${c ? us(c.child) : 'n/a'}, Postgres ${c ? us(c.postgres) : 'n/a'}, broker ${c ? us(c.kafka) : 'n/a'}; ` +
          `peak RSS ${w.peakRssMb.toFixed(0)} MB; rows ${JSON.stringify(w.counts)}; outcomes ${JSON.stringify(w.outcomes)}`,
      );
    }
  }
  const cleanup = kafka.admin();
  await cleanup.connect();
  await cleanup.deleteTopics({ topics: topicSpecs(settings).map((t) => t.name) }).catch(() => {});
  await cleanup.disconnect();
  await postgres.stop();
  process.exit(0);
}
const copyPlan = await planCopyCeiling(lanes);
const copyRounds: CopyCeilingRound[] = [];
for (let round = 1; round <= ROUNDS; round += 1) {
  rounds.push({ worker: await runWorker(round), ceiling: await runCeiling(round) });
  const database = `bench_copy_${stamp}_${round}`;
  copyRounds.push(await runCopyCeiling(copyPlan, { url: await freshDatabase(postgres.adminUrl, database), concurrency: CONCURRENCY }));
  if (process.env.BENCH_KEEP !== '1') await dropDatabase(postgres.adminUrl, database);
  log(`round ${round}: COPY ceiling ${Math.round(copyRounds.at(-1)!.rate)} events/s`);
}
const median = <T>(items: T[], by: (item: T) => number): T => [...items].sort((x, y) => by(x) - by(y))[Math.floor((items.length - 1) / 2)]!;
const workerRun = median(
  rounds.map((r) => r.worker),
  (w) => w.rate,
);
const ceilingRun = median(
  rounds.map((r) => r.ceiling),
  (c) => c.rate,
);
const workerRate = workerRun.rate;
const ceilingRate = ceilingRun.rate;
const ceilingMs = ceilingRun.ms;
const workerCpu = workerRun.cpu;
const ceilingCpu = ceilingRun.cpu;
const workerCounts = workerRun.counts;
const ceilingCounts = ceilingRun.counts;
const calibrationAfter = cpuCalibrationMs();
const ratio = median(
  rounds.map((r) => r.worker.rate / r.ceiling.rate),
  (x) => x,
);
const peakRss = Math.max(...rounds.map((r) => r.worker.peakRssMb));
const pgVersion = await (async () => {
  const c = new pg.Client({ connectionString: postgres.adminUrl });
  await c.connect();
  const { rows } = await c.query<{ server_version: string }>('SHOW server_version');
  await c.end();
  return rows[0]!.server_version;
})();
const kafkaVersion = (await import('../../infra/provision/kafka/local-kafka.ts')).KAFKA_VERSION;
const pkg = (await import('../../package.json', { with: { type: 'json' } })).default as { dependencies: Record<string, string> };

function cpuTable(): string {
  const us = (seconds: number) => Math.round((seconds / events) * 1e6).toLocaleString('en');
  const row = (name: string, c: CpuSnapshot | undefined, ms: number) =>
    c === undefined
      ? `| ${name} | n/a | n/a | n/a | n/a | n/a |`
      : `| ${name} | ${us(c.child)} | ${us(c.postgres)} | ${us(c.kafka)} | ${us(c.child + c.postgres + c.kafka)} | ${(((c.child + c.postgres + c.kafka) / (ms / 1000)) * 100).toFixed(0)}% |`;
  return [
    '| run | node process | Postgres (all backends) | Kafka broker | total | cores busy (of 200%) |',
    '|---|---|---|---|---|---|',
    row('worker (first fetch -> last commit)', workerCpu, workerRun.consumedMs),
    row('ceiling (bench process applies directly)', ceilingCpu, ceilingMs),
  ].join('\n');
}

const report = `# Worker benchmark

Command: \`npm run bench:worker\` (bench/worker/run.ts). Run: ${new Date().toISOString()}.

Machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}.
Versions: Node ${process.version}, kafkajs ${pkg.dependencies['kafkajs']}, pg ${pkg.dependencies['pg']}, PostgreSQL ${pgVersion} (${postgres.origin}),
Apache Kafka ${kafkaVersion} (single local broker, ${brokers.join(',')}). Broker, Postgres and the worker share the machine.
CPU calibration (\`cpuCalibrationMs\`, bench/lib/machine.ts: a fixed piece of the bridge's own work on one core, lower is faster; first measured 2026-12-02): before ${calibrationBefore} ms, after ${calibrationAfter} ms.
Load average (1 min) before the run: ${loadBefore[0]!.toFixed(1)}, after: ${os.loadavg()[0]!.toFixed(1)} (other processes were running on the machine when this is well above 0).

Workload: ${events.toLocaleString('en')} events over ${RESOURCES.toLocaleString('en')} resources (${dataset.duplicates.toLocaleString('en')} exact redeliveries = 10%,
${dataset.stale.toLocaleString('en')} stale versions = 10%), ~${dataset.events[0]!.value.length} bytes each, preloaded to a fresh ${PARTITIONS}-partition topic.
Worker settings: WORKER_BATCH_SIZE=${BATCH_SIZE}, WORKER_PARTITIONS_CONCURRENCY=${CONCURRENCY}, WORKER_MAX_BYTES_PER_PARTITION=${MAX_BYTES_PER_PARTITION},
node ${nodeArgs.join(' ')}, one worker process, per-event pino logs at info
(serialised, written to /dev/null), outbox relay on the worker's event loop.

${ROUNDS} rounds, each a worker run (fresh consumer group from the beginning of the topic, fresh database) then a
ceiling run (fresh database):

| round | worker events/s | ceiling events/s | worker / ceiling | worker peak RSS |
|---|---:|---:|---:|---:|
${rounds.map((r, i) => `| ${i + 1} | ${Math.round(r.worker.rate).toLocaleString('en')} | ${Math.round(r.ceiling.rate).toLocaleString('en')} | ${((r.worker.rate / r.ceiling.rate) * 100).toFixed(0)}% | ${r.worker.peakRssMb.toFixed(0)} MB |`).join('\n')}

The median round of each:

| run | time | events/s | notes |
|---|---|---|---|
| worker: first fetched batch -> last offset commit | ${(workerRun.consumedMs / 1000).toFixed(2)} s | **${Math.round(workerRate).toLocaleString('en')}** | peak RSS ${workerRun.peakRssMb.toFixed(0)} MB (${workerRun.rssAtCommitMb.toFixed(0)} MB at the last commit) |
| worker: first fetch -> applied topic fully published | ${(workerRun.drainedMs / 1000).toFixed(2)} s | ${Math.round(events / (workerRun.drainedMs / 1000)).toLocaleString('en')} | relay publishes ${workerCounts.outbox.toLocaleString('en')} applied records |
| ceiling: same apply path (parse + same SQL, batch ${BATCH_SIZE}, ${CONCURRENCY} lanes) straight at Postgres, no Kafka | ${(ceilingMs / 1000).toFixed(2)} s | ${Math.round(ceilingRate).toLocaleString('en')} | |

Worker / ceiling: **${(ratio * 100).toFixed(0)}%**, the median of the rounds' ratios (issue 12: keep >= 60%: ${ratio >= 0.6 ? 'met' : 'NOT met'}); worker **${Math.round(workerRate).toLocaleString('en')} events/s**, the median round
(target >= 10,000 events/s: ${workerRate >= 10_000 ? 'met' : 'NOT met'}); peak RSS of any worker run ${peakRss.toFixed(0)} MB (its own VmHWM;
issue 12: <= 250 MB: ${peakRss <= 250 ? 'met' : 'NOT met'}).

CPU per event, measured (/proc; the worker's own process.cpuUsage()), in microseconds:
${cpuTable()}

Outcomes (worker): ${JSON.stringify(workerRun.outcomes)}.
Rows: worker ${JSON.stringify(workerCounts)}; ceiling ${JSON.stringify(ceilingCounts)} (must be equal).

Where the time goes: the CPU table above is measured, not estimated. The worker process includes its outbox relay:
it encodes every applied record with its dozen headers (patches/kafkajs+2.2.4.patch
encodes each into one buffer) and reads the outbox back (\`npx tsx bench/worker/relay-cpu.ts\` measures the relay alone).
Postgres's share is split by \`npx tsx bench/worker/pg-cpu.ts\` (apply path per event and relay per record, read from
the backend's /proc entry), and \`npx tsx bench/worker/explain-chunk.ts 1000 20\` prints the plans of one chunk's
statements. A chunk transaction is 5 round trips: BEGIN, per-key advisory locks, one read (index probes), one
write statement (inbox + state + outbox + anomalies, from array literals and packed bytea parameters), COMMIT.
When both cores are busy, every figure here tracks the load average closely.
${copyCeilingReport(rounds, copyRounds, copyPlan, CONCURRENCY)}`;
const resultsFile = path.join(repoRoot, 'bench/results/worker.md');
await mkdir(path.dirname(resultsFile), { recursive: true });
await writeFile(resultsFile, report);
const perEventUs = (c: CpuSnapshot | undefined) =>
  c === undefined ? null : { node: (c.child / events) * 1e6, postgres: (c.postgres / events) * 1e6, kafka: (c.kafka / events) * 1e6 };
writeBenchResult({
  name: 'worker',
  command: 'npm run bench:worker',
  ranAt,
  machine: machineNow(loadBefore[0]),
  calibrationMs: { before: calibrationBefore, after: calibrationAfter },
  versions: versionsNow({ kafka: kafkaVersion, postgres: pgVersion }),
  settings: {
    events,
    resources: RESOURCES,
    partitions: PARTITIONS,
    batchSize: BATCH_SIZE,
    partitionsConcurrency: CONCURRENCY,
    maxBytesPerPartition: MAX_BYTES_PER_PARTITION,
    nodeArgs: nodeArgs.join(' '),
    relay: 'inline',
  },
  rounds: rounds.map((r, i) => ({
    round: i + 1,
    workerEventsPerSecond: r.worker.rate,
    ceilingEventsPerSecond: r.ceiling.rate,
    copyCeilingEventsPerSecond: copyRounds[i]?.rate ?? null,
    workerPerCeiling: r.worker.rate / r.ceiling.rate,
    workerPeakRssMb: r.worker.peakRssMb,
    publishedEventsPerSecond: events / (r.worker.drainedMs / 1000),
    workerCpuUsPerEvent: perEventUs(r.worker.cpu),
    ceilingCpuUsPerEvent: perEventUs(r.ceiling.cpu),
    outcomes: r.worker.outcomes,
  })),
  summary: [
    { label: 'worker, first fetch to last commit', unit: 'events/s', values: rounds.map((r) => r.worker.rate) },
    { label: 'same-SQL ceiling, no Kafka', unit: 'events/s', values: rounds.map((r) => r.ceiling.rate) },
    { label: 'worker / same-SQL ceiling', unit: '%', values: rounds.map((r) => (100 * r.worker.rate) / r.ceiling.rate), target: '≥ 60%' },
    { label: 'COPY ceiling', unit: 'events/s', values: copyRounds.map((r) => r.rate) },
    { label: 'worker peak RSS', unit: 'MB', values: rounds.map((r) => r.worker.peakRssMb), target: '≤ 250 MB' },
  ],
});
console.log(report);

if (process.env.BENCH_KEEP !== '1') {
  const cleanup = kafka.admin();
  await cleanup.connect();
  await cleanup.deleteTopics({ topics: topicSpecs(settings).map((t) => t.name) }).catch(() => {});
  await cleanup.disconnect();
}
await postgres.stop();
