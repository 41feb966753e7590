// What the relay in a process of its own costs a single event at a low rate: the time from the
// events topic's ack to the record on the applied topic, with the relay nudged in-process
// (WORKER_ROLE=all) against woken by NOTIFY (WORKER_ROLE=apply beside WORKER_ROLE=relay; both here,
// in this one process, so only the wake-up path differs). Alternating runs, each on a fresh database
// and fresh topics. Usage: npx tsx bench/worker/relay-wakeup.ts [events per run=200] [runs per topology=2]
import pg from 'pg';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { sampleThemeEvent, resourceKey } from '#domain/contract/index.ts';
import { migrate } from '#domain/store/migrate.ts';
import { parseConfig } from '#plumbing/config/env.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import { ensureTopics, topicSpecs } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { workerConfigFromEnv, workerEnvSchema } from '#services/worker/config.ts';
import { startRelayProcess } from '#services/worker/relay-process.ts';
import { startWorker } from '#services/worker/worker.ts';
import { workerEnv } from './rounds.ts';

const EVENTS = Number(process.argv[2] ?? 200);
const RUNS = Number(process.argv[3] ?? 2);
const INTERVAL_MS = 50;
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');
const logger = createLogger({ name: 'relay-wakeup', level: 'warn' });
const kafka = createKafka({ brokers, clientId: 'relay-wakeup', logger });
const postgres = await resolvePostgres((line) => console.error(line));
const stamp = Date.now().toString(36);

async function run(topology: 'inline' | 'process', n: number): Promise<number[]> {
  const name = `bench_wakeup_${stamp}_${n}`;
  const admin = new pg.Client({ connectionString: postgres.adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(postgres.adminUrl, name);
  const migrating = new pg.Pool({ connectionString: url, max: 1 });
  await migrate(migrating);
  await migrating.end();
  const settings = {
    events: `bench.wakeup.${stamp}.${n}.events`,
    applied: `bench.wakeup.${stamp}.${n}.applied`,
    eventsPartitions: 3,
    retryLevels: 0,
    replicationFactor: 1,
    minInsyncReplicas: 1,
  };
  const kafkaAdmin = kafka.admin();
  await kafkaAdmin.connect();
  await ensureTopics(kafkaAdmin, topicSpecs(settings), 1);
  const env = {
    ...workerEnv({ brokers, databaseUrl: url, settings, groupId: `bench-wakeup-${stamp}-${n}` }),
    ADMIN_PORT: '0',
    LOG_LEVEL: 'warn',
  };
  const configOf = (role: string) => workerConfigFromEnv(parseConfig(workerEnvSchema, { ...env, WORKER_ROLE: role }));
  const deps = { logger, adminServer: false };
  const worker = await startWorker(configOf(topology === 'inline' ? 'all' : 'apply'), deps);
  const relay = topology === 'process' ? await startRelayProcess(configOf('relay'), deps) : undefined;

  const acked = new Map<string, number>();
  const latencies: number[] = [];
  let resolveAll: () => void = () => {};
  const all = new Promise<void>((resolve) => (resolveAll = resolve));
  const reader = kafka.consumer({ groupId: `bench-wakeup-reader-${stamp}-${n}`, maxWaitTimeInMs: 10 });
  await reader.connect();
  await reader.subscribe({ topics: [settings.applied], fromBeginning: true });
  await reader.run({
    eachMessage: async ({ message }) => {
      const seenAt = performance.now();
      const id = (JSON.parse(message.value!.toString()) as { event_id: string }).event_id;
      const sentAt = acked.get(id);
      if (sentAt !== undefined) latencies.push(seenAt - sentAt);
      if (latencies.length === EVENTS) resolveAll();
    },
  });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
  await producer.connect();
  for (let i = 0; i < EVENTS; i += 1) {
    const event = sampleThemeEvent({ resource: { id: `w-${i}`, version: 1 } });
    await producer.send({ topic: settings.events, acks: -1, messages: [{ key: resourceKey(event), value: JSON.stringify(event) }] });
    acked.set(event.event_id, performance.now());
    await new Promise((r) => setTimeout(r, INTERVAL_MS));
  }
  await all;
  await producer.disconnect();
  await reader.disconnect();
  await relay?.close();
  await worker.close();
  await kafkaAdmin.deleteTopics({ topics: topicSpecs(settings).map((t) => t.name) }).catch(() => {});
  await kafkaAdmin.disconnect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  return latencies;
}

const pct = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;
let n = 0;
for (let r = 0; r < RUNS; r += 1) {
  for (const topology of r % 2 === 0 ? (['inline', 'process'] as const) : (['process', 'inline'] as const)) {
    const latencies = await run(topology, (n += 1));
    console.log(
      `${topology}: ack -> applied record, ms: p50 ${pct(latencies, 50).toFixed(1)}, p90 ${pct(latencies, 90).toFixed(1)}, p99 ${pct(latencies, 99).toFixed(1)} (${latencies.length} events, one every ${INTERVAL_MS} ms)`,
    );
  }
}
await postgres.stop();
process.exit(0);
