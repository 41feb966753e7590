// The bridge under a benchmark, as `npm start` runs it: a fresh database (migrated) and fresh
// topics, then the ingress and one worker as separate processes with their production Node flags
// (infra/dev/services.ts), each logging to a file. The same steps as bench/e2e/run.ts's set-up, written
// as functions with the run's name in every database, topic, group and log file name
// (bench_<name>_<stamp>, bench.<name>.<stamp>.events, ...).
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import pg from 'pg';
import { repoRoot } from '../../infra/paths.ts';
import { resolvePostgres, withDatabase, type ResolvedPostgres } from '../../infra/provision/postgres.ts';
import { applyNiceness, buildServices, serviceArgs, serviceEnv, serviceSpecs, type ServiceSpec } from '../../infra/dev/services.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { migrate } from '#domain/store/migrate.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { ensureTopics, topicNames, topicSpecs, type TopicSettings } from '#plumbing/kafka/topics.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { sleep } from '../../test/kit/eventually.ts';

/** This process and its ancestors (tsx, sh, npm, flock): not "other runs" for OtherRunsWatch. */
export function ancestorPids(): Set<number> {
  const pids = new Set<number>();
  for (let pid = process.pid; pid > 1 && !pids.has(pid);) {
    pids.add(pid);
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      break;
    }
  }
  return pids;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.once('error', reject);
  });
}

export interface BenchService {
  name: string;
  spec: ServiceSpec;
  child: ChildProcess;
  pid: number;
  adminPort: number;
  logFile: string;
  /** The node command line after `node` (for the results file). */
  args: string[];
}

export interface StartServiceOptions {
  /** Appended to the environment (the caller's environment first). */
  env: Record<string, string>;
  logFile: string;
  /** Extra Node arguments after npm start's (a preload must be JavaScript: infra/build/build.ts's buildBundles makes one). */
  extraNodeArgs?: string[];
  /** Open an IPC channel to the child (process.send in the service; a preload can use it). */
  ipc?: boolean;
}

export async function startService(spec: ServiceSpec, options: StartServiceOptions): Promise<BenchService> {
  const adminPort = await freePort();
  // Logs go to a file, not a pipe this busy process would drain late (a stalled pipe would stall the
  // service's log writes: a property of the bench, not of the service).
  const out = openSync(options.logFile, 'w');
  // The command line of infra/dev/services.ts's spawnService, which npm start's supervisor runs: the
  // service's bundle, built from the sources as they are now.
  // BENCH_SERVICES_FROM=source runs the TypeScript sources through tsx instead, for comparisons.
  await buildServices();
  const args =
    process.env.BENCH_SERVICES_FROM === 'source'
      ? [...spec.nodeArgs, '--import', 'tsx', ...(options.extraNodeArgs ?? []), path.join(repoRoot, spec.main)]
      : serviceArgs(spec, options.extraNodeArgs);
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: serviceEnv(spec, { ...process.env, ...options.env, ADMIN_PORT: String(adminPort) }),
    stdio: options.ipc ? ['ignore', out, out, 'ipc'] : ['ignore', out, out],
  });
  // At npm start's priorities (infra/dev/services.ts), WORKER_NICENESS included.
  applyNiceness(spec, child, { ...process.env, ...options.env });
  return { name: spec.kind, spec, child, pid: child.pid!, adminPort, logFile: options.logFile, args };
}

export async function waitReady(service: BenchService, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (service.child.exitCode !== null) throw new Error(`${service.name} exited with ${service.child.exitCode}; see ${service.logFile}`);
    if (Date.now() > deadline) throw new Error(`${service.name} not ready within ${timeoutMs / 1000} s; see ${service.logFile}`);
    const ready = await fetch(`http://127.0.0.1:${service.adminPort}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return;
    await sleep(200);
  }
}

/** SIGTERM, SIGKILL after 20 s; the exit code (null when killed by a signal). */
export async function stopService(service: BenchService): Promise<number | null> {
  if (service.child.exitCode !== null) return service.child.exitCode;
  const exited = new Promise<number | null>((resolve) => service.child.once('exit', (code) => resolve(code)));
  service.child.kill('SIGTERM');
  const timer = setTimeout(() => service.child.kill('SIGKILL'), 20_000);
  const code = await exited;
  clearTimeout(timer);
  return code;
}

export interface BenchBridgeOptions {
  /** Goes into every name: `soak` gives bench_soak_<stamp>, bench.soak.<stamp>.events, bench-soak-applier-<stamp>. */
  name: string;
  brokers: string[];
  logger: Logger;
  log: (line: string) => void;
  logLevel: string;
  /** Extra Node arguments for both services (see StartServiceOptions). */
  extraNodeArgs?: string[];
  ipc?: boolean;
  /** Keep the database and topics at stop(). */
  keep?: boolean;
}

export interface BenchBridge {
  stamp: string;
  postgres: ResolvedPostgres;
  database: string;
  databaseUrl: string;
  settings: TopicSettings;
  kafka: Kafka;
  /** Connected; disconnected by stop(). */
  admin: Admin;
  ingress: BenchService;
  worker: BenchService;
  ingressPort: number;
  /** The worker's consumer group on the events topic. */
  workerGroup: string;
  /** Stops both services (SIGTERM), then drops what start created (unless keep): their exit codes. */
  stop(extraGroups?: string[]): Promise<{ ingress: number | null; worker: number | null }>;
}

/** A fresh database and topics and both services started (not yet ready: see waitReady). */
export async function startBridge(options: BenchBridgeOptions): Promise<BenchBridge> {
  const { name, brokers, log } = options;
  const stamp = `${Date.now().toString(36)}${process.pid.toString(36)}`;
  const postgres = await resolvePostgres(log);
  const database = `bench_${name}_${stamp}`;
  {
    const admin = new pg.Client({ connectionString: postgres.adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
    await admin.end();
  }
  const databaseUrl = withDatabase(postgres.adminUrl, database);
  {
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    await migrate(pool);
    await pool.end();
  }
  const settings: TopicSettings = {
    ...DEFAULTS.topics,
    events: `bench.${name}.${stamp}.events`,
    applied: `bench.${name}.${stamp}.applied`,
  };
  const kafka = createKafka({ brokers, clientId: `bench-${name}`, logger: options.logger });
  const admin = kafka.admin();
  await admin.connect();
  await ensureTopics(admin, topicSpecs(settings), settings.replicationFactor);
  log(`database ${database}, topics ${settings.events} (+ retries, dlq) and ${settings.applied}`);

  const common = { KAFKA_BROKERS: brokers.join(','), TOPIC_EVENTS: settings.events, LOG_LEVEL: options.logLevel };
  const logFile = (kind: string) => path.join(os.tmpdir(), `bench-${name}-${kind}-${stamp}.log`);
  // BENCH_INGRESS_NODE_ARGS / BENCH_WORKER_NODE_ARGS: one service's extra flags, after the shared
  // ones (V8 takes a flag's last value), for side-by-side runs of one service's heap settings.
  const spawnOptions = (kind: 'ingress' | 'worker') => {
    const own = (process.env[`BENCH_${kind.toUpperCase()}_NODE_ARGS`] ?? '').split(' ').filter((a) => a.length > 0);
    const extraNodeArgs = [...(options.extraNodeArgs ?? []), ...own];
    return { ...(extraNodeArgs.length > 0 ? { extraNodeArgs } : {}), ...(options.ipc ? { ipc: true } : {}) };
  };
  const ingressPort = await freePort();
  const ingress = await startService(serviceSpecs.ingress, {
    // The load comes from one address and stands for many providers: its share is the whole cap.
    env: { ...common, PORT: String(ingressPort), HOST: '127.0.0.1', MAX_CLIENT_CONNECTIONS: '1024' },
    logFile: logFile('ingress'),
    ...spawnOptions('ingress'),
  });
  const workerGroup = `bench-${name}-applier-${stamp}`;
  const worker = await startService(serviceSpecs.worker, {
    env: {
      ...common,
      DATABASE_URL: databaseUrl,
      TOPIC_APPLIED: settings.applied,
      TOPIC_RETRY_LEVELS: String(settings.retryLevels),
      CONSUMER_GROUP: workerGroup,
    },
    logFile: logFile('worker'),
    ...spawnOptions('worker'),
  });

  let stopped: Promise<{ ingress: number | null; worker: number | null }> | undefined;
  const stop = async (extraGroups: string[] = []) => {
    const ingressCode = await stopService(ingress).catch(() => null);
    const workerCode = await stopService(worker).catch(() => null);
    if (!options.keep) {
      await admin.deleteTopics({ topics: Object.values(topicNames(settings)).flat() }).catch(() => {});
      const retryGroups = Array.from({ length: settings.retryLevels }, (_, i) => `${workerGroup}.retry.${i + 1}`);
      await admin.deleteGroups([workerGroup, ...retryGroups, ...extraGroups]).catch(() => {});
      const c = new pg.Client({ connectionString: postgres.adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`).catch(() => {});
      await c.end();
    }
    await admin.disconnect().catch(() => {});
    await postgres.stop();
    return { ingress: ingressCode, worker: workerCode };
  };
  return {
    stamp,
    postgres,
    database,
    databaseUrl,
    settings,
    kafka,
    admin,
    ingress,
    worker,
    ingressPort,
    workerGroup,
    stop: (extraGroups) => (stopped ??= stop(extraGroups)),
  };
}
