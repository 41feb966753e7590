// Node and Postgres CPU per applied record of the outbox relay alone: fills the outbox through the
// real apply path (the benchmark's dataset), then runs the real OutboxRelay against the broker
// until the outbox is drained. Usage: npx tsx bench/worker/relay-cpu.ts [resources=4000]
// Add node --cpu-prof (NODE_OPTIONS) to see where the relay's time goes.
import { readFileSync, writeFileSync } from 'node:fs';
import inspector from 'node:inspector/promises';
import pg from 'pg';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { countUnpublishedOutbox } from '#domain/store/outbox.ts';
import { migrate } from '#domain/store/migrate.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { topicLayouts } from '#plumbing/kafka/partitioned-send.ts';
import { ensureTopics, topicSpecs } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { noCrashPoints } from '#services/worker/crash-points.ts';
import { OutboxRelay, relayParts } from '#services/worker/relay/index.ts';
import { buildDataset } from './dataset.ts';

const resources = Number(process.argv[2] ?? 4000);
const logger = createLogger({ name: 'bench-relay', level: 'warn' });
const postgres = await resolvePostgres((line) => console.error(line));
const stamp = Date.now().toString(36);
const name = `bench_relay_${stamp}`;
const admin = new pg.Client({ connectionString: postgres.adminUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const databaseUrl = withDatabase(postgres.adminUrl, name);
const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
let relay: OutboxRelay | undefined;
const kafka = createKafka({ brokers: parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092'), clientId: 'bench-relay', logger });
const kafkaAdmin = kafka.admin();
const settings = {
  events: `bench.relay.${stamp}.events`,
  applied: `bench.relay.${stamp}.applied`,
  eventsPartitions: 12,
  retryLevels: 0,
  replicationFactor: 1,
  minInsyncReplicas: 1,
};

function backendCpuSeconds(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

try {
  await migrate(pool);
  await kafkaAdmin.connect();
  await ensureTopics(kafkaAdmin, topicSpecs(settings), 1);
  const records: SourceRecord[] = buildDataset(resources).events.map((e, i) => ({
    topic: settings.events,
    partition: i % 12,
    offset: String(i),
    key: e.key,
    value: Buffer.from(e.value),
    timestamp: String(Date.now()),
    headers: {},
  }));
  const applier = new SnapshotApplier({ pool });
  for (let i = 0; i < records.length; i += 1000) await applier.applyBatch(records.slice(i, i + 1000));
  const outboxRows = await countUnpublishedOutbox(pool);

  relay = new OutboxRelay({
    pool,
    ...relayParts({ kafka, databaseUrl, transactionalId: `${settings.applied}.relay`, logger, sendTimeoutMs: 30_000 }),
    layout: topicLayouts(kafkaAdmin),
    topic: settings.applied,
    batchSize: 1000,
    pollMs: 100,
    sendTimeoutMs: 30_000,
    logger,
    crashPoints: noCrashPoints,
  });
  const pids = new Set<number>();
  const clients = await Promise.all([pool.connect(), pool.connect()]);
  for (const c of clients) pids.add((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  for (const c of clients) c.release();
  const pgCpu = () => [...pids].reduce((s, p) => s + backendCpuSeconds(p), 0);
  // RELAY_PROFILE=<file.cpuprofile>: a CPU profile of the relay loop alone.
  const profileTo = process.env.RELAY_PROFILE;
  const session = profileTo ? new inspector.Session() : undefined;
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }
  const pg0 = pgCpu();
  const node0 = process.cpuUsage();
  const t0 = performance.now();
  let published = 0;
  for (let n = await relay.publishOnce(); n > 0; n = await relay.publishOnce()) published += n;
  const wall = performance.now() - t0;
  const node = process.cpuUsage(node0);
  const pgSeconds = pgCpu() - pg0;
  if (session && profileTo) {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(profileTo, JSON.stringify(profile));
    session.disconnect();
  }
  const us = (s: number) => ((s / published) * 1e6).toFixed(1);
  console.log(
    JSON.stringify({
      outboxRows,
      published,
      nodeCpuUsPerRecord: us((node.user + node.system) / 1e6),
      pgCpuUsPerRecord: us(pgSeconds),
      wallUsPerRecord: us(wall / 1000),
    }),
  );
} finally {
  await relay?.stop();
  await kafkaAdmin.deleteTopics({ topics: topicSpecs(settings).map((t) => t.name) }).catch(() => {});
  await kafkaAdmin.disconnect();
  await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  await postgres.stop();
}
