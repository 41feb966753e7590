// `npm start`: brings the whole bridge up on this machine and keeps it in the foreground.
// Broker (KAFKA_BROKERS, else Docker, else a local KRaft node from the Maven jars), Postgres
// (DATABASE_URL, else the local server, else Docker, else embedded), topics, migrations, then the
// services. Ctrl-C stops what this process started and nothing else.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { repoRoot } from './paths.ts';
import { LocalKafka, singleNodeDefaults, brokerReady, KAFKA_VERSION } from './kafka/local-kafka.ts';
import { resolvePostgres, ensureDatabase } from './postgres.ts';
import { compose, dockerEngineAvailable } from './docker.ts';
import { createKafka, parseBrokers } from '../shared/kafka/client.ts';
import { ensureTopics, topicSpecs } from '../shared/kafka/topics.ts';
import { migrate } from '../shared/db/migrate.ts';
import { parseConfig, topicEnv, topicSettingsFrom } from '../shared/config/env.ts';
import { createLogger } from '../shared/logging/logger.ts';

const logger = createLogger({ name: 'bridge-up' });
const log = (msg: string) => logger.info(msg);
const stops: Array<() => Promise<void>> = [];
const children: ChildProcess[] = [];

const devEnv = path.join(repoRoot, 'infra', 'dev.env');
// process.loadEnvFile never overrides variables already set, so the caller's environment wins.
if (existsSync(devEnv)) process.loadEnvFile(devEnv);

async function startKafka(): Promise<string> {
  if (process.env.KAFKA_BROKERS) {
    if (!(await brokerReady(parseBrokers(process.env.KAFKA_BROKERS)))) throw new Error('KAFKA_BROKERS set but unreachable');
    log(`using Kafka at ${process.env.KAFKA_BROKERS}`);
    return process.env.KAFKA_BROKERS;
  }
  if (dockerEngineAvailable()) {
    log('starting Kafka with docker compose');
    compose(['up', '-d', '--wait', 'kafka']);
    stops.push(async () => compose(['stop', 'kafka']));
    return '127.0.0.1:9092';
  }
  const kafka = new LocalKafka({ ...singleNodeDefaults, log });
  const t0 = Date.now();
  const { started } = await kafka.start();
  log(`${started.length ? 'started' : 'reusing'} local Apache Kafka ${KAFKA_VERSION} at ${kafka.brokers} (${Date.now() - t0} ms)`);
  stops.push(() => kafka.stop());
  return kafka.brokers.join(',');
}

async function startPostgres(): Promise<string> {
  const resolved = await resolvePostgres(log);
  stops.push(resolved.stop);
  const url = resolved.origin === 'env' ? resolved.adminUrl : await ensureDatabase(resolved.adminUrl, process.env.BRIDGE_DATABASE ?? 'bridge');
  log(`using Postgres (${resolved.origin}) at ${url.replace(/:[^:@/]*@/, ':***@')}`);
  return url;
}

// Each service reads ADMIN_PORT; running them side by side, each gets its own.
const services = [
  // A bounded young generation keeps the ingress's RSS under 200 MB at full load; 18 MB semi-spaces
  // scavenge less often than 16 for about 25 MB more (20 reached 201 MB; bench/results/ingress.md).
  {
    name: 'ingress',
    main: 'services/ingress/main.ts',
    nodeArgs: ['--max-semi-space-size=18'],
    env: { ADMIN_PORT: process.env.INGRESS_ADMIN_PORT ?? '9464' },
  },
  // A larger young generation for the worker: its batches allocate a lot of short-lived objects
  // (measured in bench/results/worker.md).
  {
    name: 'worker',
    main: 'services/worker/main.ts',
    nodeArgs: ['--max-semi-space-size=64'],
    env: { ADMIN_PORT: process.env.WORKER_ADMIN_PORT ?? '9465' },
  },
];

function startService(name: string, main: string, nodeArgs: string[], env: NodeJS.ProcessEnv): void {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', path.join(repoRoot, main)], {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.push(child);
  child.on('exit', (code, signal) => {
    if (!shuttingDown) {
      logger.error({ service: name, code, signal }, `${name} exited; stopping the bridge`);
      void shutdown(1);
    }
  });
}

let shuttingDown = false;
async function shutdown(code: number): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  log('stopping services');
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGTERM');
          setTimeout(() => c.kill('SIGKILL'), 15_000).unref();
        }),
    ),
  );
  for (const stop of stops.reverse()) await stop().catch((e) => logger.error({ err: e }, 'stop failed'));
  log('stopped');
  process.exit(code);
}

process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

try {
  const [brokers, databaseUrl] = await Promise.all([startKafka(), startPostgres()]);
  const topics = topicSettingsFrom(parseConfig(topicEnv));
  const kafka = createKafka({ brokers: parseBrokers(brokers), clientId: 'bridge-up', logger });
  const admin = kafka.admin();
  await admin.connect();
  const { created } = await ensureTopics(admin, topicSpecs(topics), topics.replicationFactor);
  await admin.disconnect();
  log(`topics ready (${created.length ? `created ${created.join(', ')}` : 'all existed'})`);
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  const { applied } = await migrate(pool);
  await pool.end();
  log(`migrations ready (${applied.length} applied)`);
  const env = { ...process.env, KAFKA_BROKERS: brokers, DATABASE_URL: databaseUrl };
  for (const s of services) startService(s.name, s.main, s.nodeArgs, { ...env, ...s.env });
  log('bridge is up; Ctrl-C stops it');
} catch (error) {
  logger.fatal({ err: error }, 'start-up failed');
  await shutdown(1);
}
