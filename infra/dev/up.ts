// `npm start`: brings the whole bridge up on this machine and keeps it in the foreground.
// Broker (KAFKA_BROKERS, else a local KRaft node from the Maven jars), Postgres (DATABASE_URL,
// else the local server, else embedded), topics, migrations, the dev sources seeded into Postgres
// from infra/dev/dev-sources.json (the apply of `bridge sources apply`), then the services (ingress,
// worker(s), console), each under a supervisor: a service that dies is restarted with backoff
// (infra/dev/supervisor.ts). WORKERS=N runs N workers in the consumer group. Ctrl-C (SIGINT) or
// SIGTERM stops the services, restarts nothing, and then stops what this process started and nothing
// else: Postgres, then the broker.
import {
  awaitGroupCoordinators,
  loadDevEnv,
  prepareDatabase,
  prepareTopics,
  provideDatabase,
  provideKafka,
  seedDevSources,
  type Provided,
} from './bootstrap.ts';
import {
  buildServices,
  parseWorkerCount,
  serviceNiceness,
  serviceSpecs,
  spawnService,
  stopSignalFor,
  supervised,
  upAdminPorts,
  type ServiceSpec,
} from './services.ts';
import { Supervisor } from './supervisor.ts';
import { stopInOrder } from './stop-order.ts';
import { pino } from 'pino';
import { createLogger } from '#plumbing/logging/logger.ts';
import { devEndpointsPath, writeDevEndpoints } from '#plumbing/config/dev-defaults.ts';
import { repoRoot } from '../paths.ts';

loadDevEnv();
// LOG_LEVEL is the services' (one line per request or event); the supervisor's few lines about
// starts, exits and restarts are always shown unless UP_LOG_LEVEL says otherwise. Written
// synchronously, so that they come out whole and in order up to the exit.
const logger = createLogger({ name: 'bridge-up', level: process.env.UP_LOG_LEVEL ?? 'info' }, pino.destination({ dest: 1, sync: true }));
const log = (msg: string) => logger.info(msg);
const supervisors: Supervisor[] = [];
let kafka: Promise<Provided<string>> | undefined;
let database: Promise<Provided<string>> | undefined;

async function stopAll(code: number, received: NodeJS.Signals): Promise<never> {
  log('stopping services');
  await stopInOrder({
    // Supervisors first: no restart can begin once the stop has.
    services: supervisors.map((s) => ({ stop: () => s.stop(stopSignalFor(received)) })),
    resources: [database, kafka],
    log,
    error: (err, msg) => logger.error({ err }, msg),
  });
  log('stopped');
  process.exit(code);
}

let stopping: Promise<never> | undefined;
function shutdown(code: number, received: NodeJS.Signals): Promise<never> {
  stopping ??= stopAll(code, received);
  return stopping;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    // A second signal changes nothing: the stop already under way keeps its order.
    if (stopping) log(`${signal}: already stopping (services, then Postgres, then the broker)`);
    void shutdown(0, signal);
  });
}

function supervise(name: string, spec: ServiceSpec, env: NodeJS.ProcessEnv): Supervisor {
  const supervisor = new Supervisor({
    name,
    log: logger,
    spawn: () => supervised(spawnService(spec, env)),
  });
  supervisors.push(supervisor);
  supervisor.start();
  return supervisor;
}

try {
  const workers = parseWorkerCount(process.env.WORKERS);
  // Checked before anything starts: a bad value fails the start, not each spawn.
  serviceNiceness(serviceSpecs.worker, process.env);
  kafka = provideKafka(log);
  database = provideDatabase(log);
  const [{ value: brokers }, { value: databaseUrl }] = await Promise.all([kafka, database, buildServices()]);
  await prepareTopics(brokers, logger);
  await awaitGroupCoordinators(brokers, logger);
  await prepareDatabase(databaseUrl, logger);
  await seedDevSources(databaseUrl, logger);
  if (!stopping) {
    // The sources as the seed left them in Postgres, live: a change from the console or `bridge
    // sources` reaches the running ingress and worker. SOURCES_FROM=file serves the file instead.
    const env = {
      ...process.env,
      KAFKA_BROKERS: brokers,
      DATABASE_URL: databaseUrl,
      SOURCES_FROM: process.env.SOURCES_FROM || 'postgres',
    };
    // Each service reads ADMIN_PORT; running side by side, each gets its own.
    const ports = upAdminPorts(process.env, workers);
    // For `npm run bridge` and `npm run console` started later, elsewhere: the same broker and database.
    writeDevEndpoints(devEndpointsPath(repoRoot), {
      KAFKA_BROKERS: brokers,
      DATABASE_URL: databaseUrl,
      INGRESS_ADMIN_PORT: String(ports.ingress),
      recorded_at: new Date().toISOString(),
      pid: process.pid,
    });
    const ingress = supervise('ingress', serviceSpecs.ingress, { ...env, ADMIN_PORT: String(ports.ingress) });
    const started = [{ name: 'ingress', pid: ingress.pid, admin_port: ports.ingress }];
    ports.workers.forEach((port, i) => {
      const name = workers === 1 ? 'worker' : `worker-${i + 1}`;
      const worker = supervise(name, serviceSpecs.worker, { ...env, ADMIN_PORT: String(port) });
      started.push({ name, pid: worker.pid, admin_port: port });
    });
    const consolePort = Number(process.env.CONSOLE_PORT ?? serviceSpecs.console.defaultAdminPort);
    const consoleService = supervise('console', serviceSpecs.console, {
      ...env,
      CONSOLE_PORT: String(consolePort),
      INGRESS_ADMIN_PORT: String(ports.ingress),
      // Where the worker(s) publish their metrics, for the console's overview.
      WORKER_ADMIN_PORTS: ports.workers.join(','),
    });
    started.push({ name: 'console', pid: consoleService.pid, admin_port: consolePort });
    logger.info({ started, console: `http://${process.env.CONSOLE_HOST ?? '127.0.0.1'}:${consolePort}/` }, 'bridge is up; Ctrl-C stops it');
  }
} catch (error) {
  // A stop that began during start-up ends what start-up was waiting on: not a failure.
  if (!stopping) logger.fatal({ err: error }, 'start-up failed');
  await shutdown(1, 'SIGTERM');
}
