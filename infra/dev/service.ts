// `npm run ingress` / `npm run worker` / `npm run console`: one service on its own, so a deployment can scale them
// apart (any number of workers in one consumer group). Finds the broker and Postgres the way
// `npm start` does (infra/dev/bootstrap.ts: KAFKA_BROKERS / DATABASE_URL when set, else the local
// broker and database), creates missing topics, applies migrations (worker), then runs
// the service as a child process and exits with its exit status. No supervisor here: where the
// services run apart, restarting them is the platform's job (systemd, Kubernetes, `npm start`).
// A broker this command started is left running for the other processes using it; an embedded
// Postgres it started stops once the service has exited.
import os from 'node:os';
import path from 'node:path';
import {
  awaitGroupCoordinators,
  loadDevEnv,
  prepareDatabase,
  prepareTopics,
  provideDatabase,
  provideKafka,
  type Provided,
} from './bootstrap.ts';
import { cacheDir } from '../paths.ts';
import { buildServices, claimPort, serviceNiceness, serviceSpecs, spawnService, stopSignalFor, type ServiceKind } from './services.ts';
import { pino } from 'pino';
import { createLogger } from '#plumbing/logging/logger.ts';

const kind = process.argv[2];
if (kind !== 'ingress' && kind !== 'worker' && kind !== 'console') {
  console.error('usage: tsx infra/dev/service.ts ingress|worker|console');
  process.exit(2);
}
const spec = serviceSpecs[kind as ServiceKind];

loadDevEnv();
// Written synchronously: the few lines of a start and a stop come out whole and in order, up to the exit.
const logger = createLogger(
  { name: `run-${spec.kind}`, level: process.env.UP_LOG_LEVEL ?? 'info' },
  pino.destination({ dest: 1, sync: true }),
);
const log = (msg: string) => logger.info(msg);

let env: NodeJS.ProcessEnv = process.env;
let leftRunning: string[] = [];
let database: Provided<string> | undefined;

/** Stops the Postgres this command started (if it did), then exits with `code`. */
async function exit(code: number): Promise<never> {
  if (database?.started) log(`stopping ${database.started}`);
  await database?.stop().catch((error: unknown) => logger.error({ err: error }, 'could not stop Postgres'));
  if (database?.started) log(`stopped ${database.started}`);
  process.exit(code);
}

// The console starts nothing: it reads the broker and database `npm start` recorded
// (shared/plumbing/config/dev-defaults.ts) and says on its pages when one is unreachable.
if (spec.kind !== 'console')
  try {
    // Checked before anything starts: a bad WORKER_NICENESS fails the start with its message.
    serviceNiceness(spec, process.env);
    const kafka = await provideKafka(log);
    env = { ...process.env, KAFKA_BROKERS: kafka.value };
    leftRunning = kafka.leftRunning ? [kafka.leftRunning] : [];
    if (spec.kind === 'worker') {
      database = await provideDatabase(log);
      env.DATABASE_URL = database.value;
      await prepareTopics(kafka.value, logger);
      await awaitGroupCoordinators(kafka.value, logger);
      await prepareDatabase(database.value, logger);
      // Workers side by side on one machine each need an admin port: the first free one from 9465 up.
      env.ADMIN_PORT = process.env.ADMIN_PORT || String((await claimPort(spec.defaultAdminPort, path.join(cacheDir, 'admin-ports'))).port);
    } else {
      await prepareTopics(kafka.value, logger);
      env.ADMIN_PORT = process.env.ADMIN_PORT || String(spec.defaultAdminPort);
    }
  } catch (error) {
    logger.fatal({ err: error }, 'start-up failed');
    await exit(1);
  }

await buildServices();
const child = spawnService(spec, env);
logger.info(
  { child: spec.kind, pid: child.pid, admin_port: Number(env.ADMIN_PORT) },
  `${spec.kind} started (pid ${child.pid}, admin port ${env.ADMIN_PORT})`,
);
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  // Once: npm and tsx relay a Ctrl-C to this process as well, and a repeated signal would kill the
  // service instead of stopping it (see stopSignalFor).
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    child.kill(stopSignalFor(signal));
  });
}
child.once('error', (error) => {
  logger.fatal({ err: error }, `${spec.kind} could not be started`);
  void exit(1);
});
child.once('exit', (code, signal) => {
  logger.info({ child: spec.kind, pid: child.pid, code, signal }, `${spec.kind} exited (${signal ? `signal ${signal}` : `code ${code}`})`);
  for (const what of leftRunning) log(`left running for other processes: ${what}`);
  void exit(code ?? 128 + (signal ? (os.constants.signals[signal] ?? 0) : 0));
});
