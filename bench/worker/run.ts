// npm run bench:worker: 200,000 events over 20,000 resources (10% duplicates, 10% stale) preloaded
// to a fresh topic; the worker is timed from its first fetched batch to its last offset commit.
// The ceiling drives the same apply path (same SQL, same batch size, same parallelism) straight
// at Postgres with a plain pg pool, no Kafka; the COPY ceiling writes the same rows with COPY
// (bench/worker/copy-ceiling.ts). Each round runs all three (bench/worker/rounds.ts); the results
// go to bench/results/worker.md and .json (bench/worker/report.ts).
// Environment: BENCH_ROUNDS, BENCH_RESOURCES, BENCH_BATCH_SIZE, BENCH_CONCURRENCY,
// BENCH_MAX_BYTES_PER_PARTITION, BENCH_SEMI_SPACE_MB, BENCH_WORKER_NODE_ARGS, BENCH_WORKER_FROM=source,
// BENCH_AB_ENV, BENCH_CHILD_STDOUT, BENCH_KEEP=1 (keep the databases and topics), KAFKA_BROKERS;
// the worker child reads BENCH_GC_STATS, BENCH_PROMOTION_PROFILE, BENCH_MEMORY_SAMPLES, BENCH_WORKER_LOG_FILE, BENCH_LOOP_DELAY.
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import pg from 'pg';
import { resolvePostgres } from '../../infra/provision/postgres.ts';
import { repoRoot } from '../../infra/paths.ts';
import { buildBundles } from '../../infra/build/build.ts';
import { serviceNiceness, serviceSpecs } from '../../infra/dev/services.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { ensureTopics, topicSpecs, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { cpuCalibrationMs } from '../lib/machine.ts';
import { writeBenchResult } from '../lib/results.ts';
import { buildDataset, partitionLanes } from './dataset.ts';
import { planCopyCeiling } from './copy-plan.ts';
import { renderReport, workerResult, type WorkerBenchRun } from './report.ts';
import { BenchRounds } from './rounds.ts';

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

const [relayProcessEntry] = (await buildBundles([serviceSpecs.worker.main])) as [string];

const lanes = partitionLanes(dataset.events, {
  topic: settings.events,
  partitions: PARTITIONS,
  batchSize: BATCH_SIZE,
  partitionOf: (key) => partitionOf.get(key)!,
});
const runner = new BenchRounds({
  adminUrl: postgres.adminUrl,
  stamp,
  brokers,
  settings,
  nodeArgs,
  workerChildEntry,
  relayProcessEntry,
  ends,
  events,
  batchSize: BATCH_SIZE,
  maxBytesPerPartition: MAX_BYTES_PER_PARTITION,
  concurrency: CONCURRENCY,
  lanes,
  keep: process.env.BENCH_KEEP === '1',
  childStdoutFile: process.env.BENCH_CHILD_STDOUT,
  log,
});

async function deleteTopics(): Promise<void> {
  const cleanup = kafka.admin();
  await cleanup.connect();
  await cleanup.deleteTopics({ topics: topicSpecs(settings).map((t) => t.name) }).catch(() => {});
  await cleanup.disconnect();
}

// BENCH_AB_ENV="NAME=value ...": an A/B of worker runs only, alternating without (A) and with (B)
// that environment in the child (BENCH_NODE_ARGS=a,b adds Node flags; BENCH_WORKER_ENTRY=FILE runs
// another tree's worker-child bundle), A B, B A, ... so both see
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
      const w = await runner.worker(round * 10 + (arm === 'A' ? 1 : 2), env);
      const c = w.cpuToPublished;
      console.log(
        `${arm} round ${round}: ${Math.round(w.rate)} events/s to the last commit, ${Math.round(events / (w.drainedMs / 1000))} events/s published; ` +
          `CPU per published event: node ${c ? us(c.child) : 'n/a'}, Postgres ${c ? us(c.postgres) : 'n/a'}, broker ${c ? us(c.kafka) : 'n/a'}; ` +
          `peak RSS ${w.peakRssMb.toFixed(0)} MB${w.relayProcess ? ` + relay process ${w.relayProcess.peakRssMb.toFixed(0)} MB` : ''}; rows ${JSON.stringify(w.counts)}; outcomes ${JSON.stringify(w.outcomes)}`,
      );
    }
  }
  await deleteTopics();
  await postgres.stop();
  process.exit(0);
}

// Rounds alternate worker and ceiling, so both see the same machine over the same minutes; the
// report takes medians (these 2-core machines are noisy). The COPY ceiling is a third run in each round.
const copyPlan = await planCopyCeiling(lanes);
const measured: WorkerBenchRun['rounds'] = [];
const copyRounds: WorkerBenchRun['copyRounds'] = [];
for (let round = 1; round <= ROUNDS; round += 1) {
  // The bridge's two topologies: the relay on the worker's event loop (WORKER_ROLE=all, npm start's)
  // and in a process of its own (WORKER_ROLE=apply beside WORKER_ROLE=relay).
  measured.push({
    worker: await runner.worker(round),
    split: await runner.worker(round + 100, { WORKER_ROLE: 'apply' }),
    ceiling: await runner.ceiling(round),
  });
  copyRounds.push(await runner.copyCeiling(round, copyPlan));
}
const calibrationAfter = cpuCalibrationMs();
const pgVersion = await (async () => {
  const c = new pg.Client({ connectionString: postgres.adminUrl });
  await c.connect();
  const { rows } = await c.query<{ server_version: string }>('SHOW server_version');
  await c.end();
  return rows[0]!.server_version;
})();
const kafkaVersion = (await import('../../infra/provision/kafka/local-kafka.ts')).KAFKA_VERSION;
const pkg = (await import('../../package.json', { with: { type: 'json' } })).default as { dependencies: Record<string, string> };

const run: WorkerBenchRun = {
  ranAt,
  brokers,
  postgresOrigin: postgres.origin,
  pgVersion,
  kafkaVersion,
  dependencies: pkg.dependencies,
  loadBefore,
  calibrationMs: { before: calibrationBefore, after: calibrationAfter },
  resources: RESOURCES,
  dataset,
  partitions: PARTITIONS,
  batchSize: BATCH_SIZE,
  concurrency: CONCURRENCY,
  maxBytesPerPartition: MAX_BYTES_PER_PARTITION,
  nodeArgs,
  niceness: serviceNiceness(serviceSpecs.worker, process.env),
  roundsWanted: ROUNDS,
  rounds: measured,
  copyRounds,
  copyPlan,
};
const report = renderReport(run);
const resultsFile = path.join(repoRoot, 'bench/results/worker.md');
await mkdir(path.dirname(resultsFile), { recursive: true });
await writeFile(resultsFile, report);
writeBenchResult(workerResult(run));
console.log(report);

if (process.env.BENCH_KEEP !== '1') await deleteTopics();
await postgres.stop();
