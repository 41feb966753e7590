// The start-up steps shared by `npm start` (infra/dev/up.ts) and `npm run ingress` / `npm run worker`
// (infra/dev/service.ts): the dev env file, finding or starting the broker and Postgres, topics and
// migrations. Each resolver returns a `stop` that stops only what it started itself.
import path from 'node:path';
import pg from 'pg';
import { repoRoot } from '../paths.ts';
import { LocalKafka, singleNodeDefaults, KAFKA_VERSION, type LocalKafkaOptions } from '../provision/kafka/local-kafka.ts';
import { canConnect, ensureDatabase, localServerUrl, resolvePostgres, type ResolvedPostgres } from '../provision/postgres.ts';
import { startEmbeddedApart } from './embedded-postgres.ts';
import { brokerReady, createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { ensureTopics, topicSpecs } from '#plumbing/kafka/topics.ts';
import { migrate } from '#domain/store/migrate.ts';
import { retryGroupId } from '#services/worker/retry/retry-consumers.ts';
import { desiredFromFile, keyringFromEnv, SourceCatalog, type PlannedChange } from '#domain/sources/index.ts';
import { parseConfig, topicEnv, topicSettingsFrom } from '#plumbing/config/env.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { Kafka } from '#plumbing/kafka/types.ts';

// The dev env file, as every development command reads it (the benchmarks load it from here too).
export { devEnvFile, loadDevEnv } from '#plumbing/config/dev-defaults.ts';

export interface Provided<T> {
  value: T;
  /** What this process started (its stop lines name it); undefined when it found it running. */
  started?: string;
  /** Stops what this process started, nothing else, and resolves once it has stopped. */
  stop: () => Promise<void>;
  /** When this process may have started it: how to stop it if it is left running. */
  leftRunning?: string;
}

const noop = async () => {};

/**
 * The broker the start commands start: the shared single node on 9092, or one on LOCAL_KAFKA_PORT
 * (its controller on the port above) with data of its own.
 */
export function localKafkaOptions(env: Record<string, string | undefined> = process.env): LocalKafkaOptions {
  if (!env.LOCAL_KAFKA_PORT) return { ...singleNodeDefaults };
  const port = Number(env.LOCAL_KAFKA_PORT);
  if (!Number.isInteger(port) || port < 1 || port > 65534)
    throw new Error(`LOCAL_KAFKA_PORT must be a port, not ${JSON.stringify(env.LOCAL_KAFKA_PORT)}`);
  return { ...singleNodeDefaults, basePort: port, name: `${singleNodeDefaults.name}-${port}` };
}

/** KAFKA_BROKERS when set (must answer); else a local KRaft node from the Maven jars. */
export async function provideKafka(log: (line: string) => void): Promise<Provided<string>> {
  if (process.env.KAFKA_BROKERS) {
    if (!(await brokerReady(parseBrokers(process.env.KAFKA_BROKERS)))) throw new Error('KAFKA_BROKERS set but unreachable');
    log(`using Kafka at ${process.env.KAFKA_BROKERS}`);
    return { value: process.env.KAFKA_BROKERS, stop: noop };
  }
  const kafka = new LocalKafka({ ...localKafkaOptions(), log });
  const t0 = Date.now();
  // A node that was spawned but never became ready is stopped too, not left behind.
  const { started } = await kafka.start().catch(async (error: unknown) => {
    await kafka.stop();
    throw error;
  });
  log(`${started.length ? 'started' : 'reusing'} local Apache Kafka ${KAFKA_VERSION} at ${kafka.brokers} (${Date.now() - t0} ms)`);
  return {
    value: kafka.brokers.join(','),
    stop: () => kafka.stop(),
    ...(started.length ? { started: `the local Kafka at ${kafka.brokers}`, leftRunning: 'the local Kafka (npm run kafka:stop)' } : {}),
  };
}

/**
 * DATABASE_URL when set; else the local server, else embedded Postgres (also with
 * BRIDGE_POSTGRES=embedded), in the database BRIDGE_DATABASE (`bridge`). An embedded Postgres runs
 * in a process group of its own (embedded-postgres.ts) and stops only when `stop` is called or this
 * process ends.
 */
export async function provideDatabase(log: (line: string) => void): Promise<Provided<string>> {
  const choice = process.env.BRIDGE_POSTGRES ?? '';
  if (choice !== '' && choice !== 'embedded') throw new Error(`BRIDGE_POSTGRES must be unset or embedded, not ${JSON.stringify(choice)}`);
  const embedded = !process.env.DATABASE_URL && (choice === 'embedded' || !(await canConnect(localServerUrl)));
  const resolved: ResolvedPostgres & { started?: boolean } = embedded ? await startEmbeddedApart(log) : await resolvePostgres(log);
  let url: string;
  try {
    url =
      resolved.origin === 'env'
        ? resolved.adminUrl
        : await ensureDatabase(resolved.adminUrl, process.env.BRIDGE_DATABASE ?? DEFAULTS.dev.database);
  } catch (error) {
    await resolved.stop();
    throw error;
  }
  log(`using Postgres (${resolved.origin}) at ${url.replace(/:[^:@/]*@/, ':***@')}`);
  return { value: url, stop: resolved.stop, ...(resolved.started ? { started: 'the embedded Postgres' } : {}) };
}

/**
 * A client for the start-up steps. They wait out the states a starting or busy broker passes
 * through (topics not yet in its metadata, coordinators still loading) and throw what they cannot,
 * which the start command reports as its failure: kafkajs's own lines on the way are left out.
 */
function startupKafka(brokers: string, logger: Logger): Kafka {
  return createKafka({ brokers: parseBrokers(brokers), clientId: 'bridge-up', logger: logger.child({}, { level: 'silent' }) });
}

/** Creates the missing topics (names, partitions and configs from the TOPIC_* variables). */
export async function prepareTopics(brokers: string, logger: Logger): Promise<void> {
  const topics = topicSettingsFrom(parseConfig(topicEnv));
  const kafka = startupKafka(brokers, logger);
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { created } = await ensureTopics(admin, topicSpecs(topics), topics.replicationFactor);
    logger.info(`topics ready (${created.length ? `created ${created.join(', ')}` : 'all existed'})`);
  } finally {
    await admin.disconnect();
  }
}

/**
 * Waits until the broker answers for the worker's consumer groups (CONSUMER_GROUP and one per retry
 * level). A broker that has never had a group creates its offsets topic at the first request for
 * one and then loads each partition of it; a consumer that joins before its partition is loaded is
 * refused (COORDINATOR_LOAD_IN_PROGRESS), and kafkajs answers that by crashing and restarting the
 * consumer, in error lines, in a start where nothing is wrong. Describing the groups first waits
 * the same states out quietly.
 */
export async function awaitGroupCoordinators(
  brokers: string,
  logger: Logger,
  env: Record<string, string | undefined> = process.env,
  timeoutMs = 60_000,
): Promise<void> {
  const group = env.CONSUMER_GROUP || DEFAULTS.consumerGroup;
  const { retryLevels } = topicSettingsFrom(parseConfig(topicEnv, env));
  const groups = [group, ...Array.from({ length: retryLevels }, (_, i) => retryGroupId(group, i + 1))];
  const kafka = startupKafka(brokers, logger);
  const admin = kafka.admin();
  const t0 = Date.now();
  await admin.connect();
  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await admin.describeGroups(groups);
        break;
      } catch (error) {
        if (Date.now() - t0 > timeoutMs)
          throw new Error(`the broker did not answer for the consumer groups within ${timeoutMs} ms`, { cause: error });
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 100 * attempt)));
      }
    }
  } finally {
    await admin.disconnect();
  }
  logger.info(`consumer groups ready (${groups.length} coordinators answered in ${Date.now() - t0} ms)`);
}

/** Applies pending migrations (concurrent migrators serialise on a lock). */
export async function prepareDatabase(databaseUrl: string, logger: Logger): Promise<void> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  try {
    const { applied } = await migrate(pool);
    logger.info(`migrations ready (${applied.length} applied)`);
  } finally {
    await pool.end();
  }
}

/** Who the dev seed's changes are by, in the audit log. */
export const DEV_SEED_ACTOR = 'dev-seed';

/**
 * Makes the dev database hold the dev sources file (WEBHOOK_SOURCES_FILE, secrets from the dev env):
 * the same apply as `bridge sources apply -f`, so the file stays the way to change the dev sources.
 * Sources created elsewhere (the console, the API) are left alone, and so is `enabled`; a dev source
 * changed elsewhere (a rotated secret) goes back to what the file says.
 */
export async function seedDevSources(
  databaseUrl: string,
  logger: Logger,
  env: Record<string, string | undefined> = process.env,
): Promise<PlannedChange[]> {
  const file = env.WEBHOOK_SOURCES_FILE;
  if (!file) throw new Error('WEBHOOK_SOURCES_FILE is not set: infra/dev/dev.env names the dev sources file');
  const desired = desiredFromFile(path.resolve(repoRoot, file), env);
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  // An idle connection ended by the server (a database dropped right after) must not crash the caller.
  pool.on('error', (error) => logger.warn({ err: error }, 'dev seed: idle database connection failed'));
  try {
    const { changes, configVersion } = await new SourceCatalog(pool, keyringFromEnv(env)).apply(DEV_SEED_ACTOR, desired);
    const changed = changes.filter((c) => c.action !== 'unchanged').map((c) => `${c.action} ${c.sourceId}`);
    logger.info(`dev sources ready (${changed.length ? changed.join(', ') : 'no change'}; configuration version ${configVersion})`);
    return changes;
  } finally {
    await pool.end();
  }
}
