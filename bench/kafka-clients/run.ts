// kafkajs and @platformatic/kafka side by side on the bridge's hot paths, in one run:
//   ingress  an idempotent producer, acks=all, callers each sending 1-50 records at a time through
//            the ingress's coalescing (one batch in flight): records/s and send latency;
//   fetch    a group member reading a preloaded topic from the beginning to its end offsets, every
//            record's key, value and headers decoded to text: records/s;
//   relay    transactional producers taken in turn (the relay's lanes), one transaction of
//            BENCH_TX_RECORDS records after another: transactions/s and records/s.
// Each client runs each path in a process of its own (child.ts), the clients alternating in
// every round, on fresh topics of 12 partitions. CPU per record and peak RSS are the child's.
//   npm run bench:kafka-clients
//   (BENCH_ROUNDS=3, BENCH_DURATION_MS=10000, BENCH_WARMUP_MS=2000, BENCH_CALLERS=64,
//    BENCH_FETCH_RESOURCES=20000 (x10 records), BENCH_TX_RECORDS=500, BENCH_LANES=2,
//    BENCH_PATHS=ingress,fetch,relay, KAFKA_BROKERS)
// Writes bench/results/kafka-clients.md and .json.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { createIdempotentProducer } from '#plumbing/kafka/producers.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { brokerAge, cpuSnapshot } from '../lib/cpu.ts';
import { cpuCalibrationMs } from '../lib/machine.ts';
import { machineNow, RESULTS_DIR, versionsNow, writeBenchResult, type BenchResult } from '../lib/results.ts';
import { fmt } from '../lib/stats.ts';
import type { ChildResult, ChildTask, Path } from './child.ts';
import { CLIENTS, type ClientName } from './clients.ts';
import { eventRecords } from './records.ts';
import { compare, renderReport, summaryFigures, wins, WIN_MARGIN, type RoundResult } from './report.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 10_000);
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 2000);
const CALLERS = Number(process.env.BENCH_CALLERS ?? 64);
const FETCH_RESOURCES = Number(process.env.BENCH_FETCH_RESOURCES ?? 20_000);
const TX_RECORDS = Number(process.env.BENCH_TX_RECORDS ?? 500);
const LANES = Number(process.env.BENCH_LANES ?? 2);
const PATHS = (process.env.BENCH_PATHS ?? 'ingress,fetch,relay').split(',') as Path[];
const PARTITIONS = 12;
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');
const log = (line: string) => console.error(`[bench:kafka-clients] ${line}`);

// The ingress's defaults (services/ingress/config.ts) and the worker's fetch size (services/worker/config.ts).
const settings = {
  rounds: ROUNDS,
  durationMs: DURATION_MS,
  warmUpMs: WARMUP_MS,
  partitions: PARTITIONS,
  ingress: { callers: CALLERS, requestRecords: '1-50', maxBatchRecords: 500, maxBatchBytes: 512 * 1024, lingerMs: 0 },
  fetch: { records: FETCH_RESOURCES * 10, keys: FETCH_RESOURCES, maxBytesPerPartition: 1_048_576, maxWaitMs: 500, commits: 'none' },
  relay: { transactionRecords: TX_RECORDS, lanes: LANES },
  recordPoolResources: 2000,
};

const loadBefore = loadavg()[0]!;
const calibrationBefore = cpuCalibrationMs();
const ranAt = new Date().toISOString();
const stamp = `${Date.now().toString(36)}${process.pid.toString(36)}`;
const logger = createLogger({ name: 'bench-kafka-clients', level: 'warn' });
const kafka = createKafka({ brokers, clientId: 'bench-kafka-clients', logger });
const admin = kafka.admin();
await admin.connect();
const replicationFactor = Math.min(3, (await admin.describeCluster()).brokers.length);
const created: string[] = [];
async function freshTopic(name: string): Promise<string> {
  const topic = `bench.kafka-clients.${stamp}.${name}`;
  await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor }], waitForLeaders: true });
  created.push(topic);
  return topic;
}
async function recordsOn(topic: string): Promise<number> {
  return (await admin.fetchTopicOffsets(topic)).reduce((sum, o) => sum + Number(o.high) - Number(o.low), 0);
}

/** Records a read_committed group member reads from the beginning, once the count stops moving. */
async function committedRecords(topic: string, expected: number): Promise<number> {
  const consumer = kafka.consumer({ groupId: `${topic}.verify`, maxBytesPerPartition: 1_048_576, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let count = 0;
  let lastAt = Date.now();
  await consumer.run({
    autoCommit: false,
    partitionsConsumedConcurrently: PARTITIONS,
    eachBatch: async ({ batch }) => {
      count += batch.messages.length;
      lastAt = Date.now();
    },
  });
  const startedAt = Date.now();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const quietMs = Date.now() - lastAt;
    if ((count >= expected && quietMs > 1000) || quietMs > 15_000 || Date.now() - startedAt > 120_000) break;
  }
  await consumer.disconnect();
  return count;
}

const fetchTopic = PATHS.includes('fetch') ? await freshTopic('fetch') : '';
if (fetchTopic) {
  const records = eventRecords(FETCH_RESOURCES);
  log(`preloading ${records.length} records to ${fetchTopic}`);
  const producer = createIdempotentProducer(kafka);
  await producer.connect();
  for (let i = 0; i < records.length; i += 500) {
    const messages = records.slice(i, i + 500).map((r) => ({ key: r.key, value: r.value, headers: r.headers }));
    await producer.send({ topic: fetchTopic, acks: -1, messages });
  }
  await producer.disconnect();
  const onTopic = await recordsOn(fetchTopic);
  if (onTopic !== records.length) throw new Error(`preloaded ${records.length} records, the topic holds ${onTopic}`);
}

const childFile = path.join(import.meta.dirname, 'child.ts');
function runChild(task: ChildTask): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', childFile, JSON.stringify(task)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      if (line === undefined) reject(new Error(`${task.client} ${task.path} exited ${code} without a result`));
      else resolve(JSON.parse(line.slice('RESULT '.length)) as ChildResult);
    });
  });
}

const results: RoundResult[] = [];
const brokerCpu: Array<{ round: number; client: ClientName; path: Path; brokerCpuSeconds: number }> = [];
for (let round = 1; round <= ROUNDS; round += 1) {
  // Alternate which client goes first, so neither always meets the broker just after the other.
  const order: ClientName[] = round % 2 === 1 ? [...CLIENTS] : [...CLIENTS].reverse();
  for (const p of PATHS) {
    for (const client of order) {
      const topic = p === 'fetch' ? fetchTopic : await freshTopic(`${p}.${round}.${client}`);
      const task: ChildTask = {
        client,
        path: p,
        brokers,
        topic,
        durationMs: DURATION_MS,
        warmUpMs: WARMUP_MS,
        callers: CALLERS,
        maxBatchRecords: settings.ingress.maxBatchRecords,
        maxBatchBytes: settings.ingress.maxBatchBytes,
        transactionRecords: TX_RECORDS,
        transactionalIds: Array.from({ length: LANES }, (_, lane) => `bench-kafka-clients-${stamp}-${round}-${client}.${lane}`),
        groupId: `bench-kafka-clients-${stamp}-${round}-${client}`,
        total: settings.fetch.records,
        maxBytesPerPartition: settings.fetch.maxBytesPerPartition,
        resources: settings.recordPoolResources,
      };
      const before = cpuSnapshot();
      const result: RoundResult = { round, ...(await runChild(task)) };
      brokerCpu.push({ round, client, path: p, brokerCpuSeconds: Number((cpuSnapshot().kafka - before.kafka).toFixed(2)) });
      if (p === 'ingress' && result.ackedTotal !== undefined) {
        const onTopic = await recordsOn(topic);
        result.ledgerOk = onTopic === result.ackedTotal;
        if (!result.ledgerOk) result.errors.push(`ledger: ${result.ackedTotal} records acked, ${onTopic} on the topic`);
      }
      if (p === 'relay' && result.ackedTotal !== undefined) {
        // Offsets count aborted records and markers too: only a read_committed reader tells that
        // every committed transaction's records are there, and nothing else.
        const committed = await committedRecords(topic, result.ackedTotal);
        result.ledgerOk = committed === result.ackedTotal;
        if (!result.ledgerOk) result.errors.push(`ledger: ${result.ackedTotal} records committed, ${committed} read committed`);
      }
      results.push(result);
      const extra =
        p === 'ingress'
          ? ` p50 ${fmt(result.latencyMs?.p50 ?? NaN)} ms p99 ${fmt(result.latencyMs?.p99 ?? NaN)} ms`
          : p === 'relay'
            ? ` ${fmt(result.transactionsPerSecond ?? NaN)} tx/s`
            : '';
      log(
        `round ${round} ${p} ${client}: ${fmt(result.recordsPerSecond, 0)} records/s${extra}, ` +
          `${fmt(result.cpuUsPerRecord)} µs CPU/record, peak RSS ${fmt(result.peakRssMb)} MiB` +
          (result.errors.length ? `, ERRORS: ${result.errors.join('; ').slice(0, 400)}` : ''),
      );
    }
  }
}

await admin.deleteTopics({ topics: created }).catch((error: unknown) => log(`could not delete topics: ${(error as Error).message}`));
await admin.disconnect();

const comparisons = compare(results);
const won = wins(comparisons);
const calibrationAfter = cpuCalibrationMs();
const platformaticVersion = (
  JSON.parse(
    readFileSync(path.resolve(import.meta.dirname, '..', '..', 'node_modules', '@platformatic', 'kafka', 'package.json'), 'utf8'),
  ) as {
    version: string;
  }
).version;
const command = 'npm run bench:kafka-clients';
const result: BenchResult = {
  name: 'kafka-clients',
  command,
  ranAt,
  machine: machineNow(loadBefore),
  calibrationMs: { before: calibrationBefore, after: calibrationAfter },
  versions: { ...versionsNow({ kafka: KAFKA_VERSION }), platformaticKafka: platformaticVersion },
  settings: {
    ...settings,
    brokers: brokers.length,
    replicationFactor,
    brokerAge: brokerAge(),
    winMargin: WIN_MARGIN,
    platformaticWinsOn: won,
  },
  rounds: results.map((r) => ({
    ...r,
    brokerCpuSeconds: brokerCpu.find((b) => b.round === r.round && b.client === r.client && b.path === r.path)?.brokerCpuSeconds,
  })),
  summary: summaryFigures(comparisons),
};
writeBenchResult(result);

writeFileSync(path.join(RESULTS_DIR, 'kafka-clients.md'), renderReport(result));
log(`wrote bench/results/kafka-clients.md and .json; platformatic wins by ${WIN_MARGIN}x on: ${won.length ? won.join(', ') : 'nothing'}`);
