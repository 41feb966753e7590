// `npm start`: brings the whole bridge up on this machine and keeps it in the foreground.
// Broker (KAFKA_BROKERS, else a local KRaft node from the Maven jars), Postgres (DATABASE_URL,
// else the local server, else embedded), topics, migrations, the dev sources seeded into Postgres
// from infra/dev/dev-sources.json (the apply of `bridge sources apply`), then the services (ingress,
// worker(s), console), each under a supervisor: a service that dies is restarted with backoff
// (infra/dev/supervisor.ts). WORKERS=N runs N workers in the consumer group. Ctrl-C (SIGINT) or
// SIGTERM stops the services, restarts nothing, and stops what this process started and nothing else.
import { loadDevEnv, prepareDatabase, prepareTopics, provideDatabase, provideKafka, seedDevSources, type Provided } from './bootstrap.ts';
import {
  buildServices,
  parseWorkerCount,
  serviceSpecs,
  spawnService,
  stopSignalFor,
  supervised,
  upAdminPorts,
  type ServiceSpec,
} from './services.ts';
import { Supervisor } from './supervisor.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { devEndpointsPath, writeDevEndpoints } from '#plumbing/config/dev-defaults.ts';
import { repoRoot } from '../paths.ts';

loadDevEnv();
// LOG_LEVEL is the services' (one line per request or event); the supervisor's few lines about
// starts, exits and restarts are always shown unless UP_LOG_LEVEL says otherwise.
const logger = createLogger({ name: 'bridge-up', level: process.env.UP_LOG_LEVEL ?? 'info' });
const log = (msg: string) => logger.info(msg);
const stops: Array<() => Promise<void>> = [];
const supervisors: Supervisor[] = [];

let shuttingDown = false;
async function shutdown(code: number, received: NodeJS.Signals = 'SIGINT'): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  log('stopping services');
  // Supervisors first: no restart can begin once shutdown has.
  await Promise.all(supervisors.map((s) => s.stop(stopSignalFor(received))));
  for (const stop of stops.reverse()) await stop().catch((e) => logger.error({ err: e }, 'stop failed'));
  log('stopped');
  process.exit(code);
}

process.on('SIGINT', () => void shutdown(0, 'SIGINT'));
process.on('SIGTERM', () => void shutdown(0, 'SIGTERM'));

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
  // Each stop is registered as soon as its resolver returns, so a failure of the other still stops it.
  const registered = async (provided: Promise<Provided<string>>) => {
    const p = await provided;
    stops.push(p.stop);
    return p;
  };
  const [kafka, database] = await Promise.all([registered(provideKafka(log)), registered(provideDatabase(log)), buildServices()]);
  await prepareTopics(kafka.value, logger);
  await prepareDatabase(database.value, logger);
  await seedDevSources(database.value, logger);
  if (!shuttingDown) {
    // The sources as the seed left them in Postgres, live: a change from the console or `bridge
    // sources` reaches the running ingress and worker. SOURCES_FROM=file serves the file instead.
    const env = {
      ...process.env,
      KAFKA_BROKERS: kafka.value,
      DATABASE_URL: database.value,
      SOURCES_FROM: process.env.SOURCES_FROM || 'postgres',
    };
    // Each service reads ADMIN_PORT; running side by side, each gets its own.
    const ports = upAdminPorts(process.env, workers);
    // For `npm run bridge` and `npm run console` started later, elsewhere: the same broker and database.
    writeDevEndpoints(devEndpointsPath(repoRoot), {
      KAFKA_BROKERS: kafka.value,
      DATABASE_URL: database.value,
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
  logger.fatal({ err: error }, 'start-up failed');
  await shutdown(1);
}
