import { Registry } from 'prom-client';
import { loadConfigOrExit } from '#plumbing/config/env.ts';
import { createLogger, stdoutDestination } from '#plumbing/logging/logger.ts';
import { startAdminServer, type AdminServer } from '#plumbing/observability/admin-server.ts';
import { startTracingOrExit } from '#plumbing/observability/tracing.ts';
import { SourcesConfigError } from '#domain/sources/index.ts';
import { DEFAULT_STOP_TIMEOUT_MS, workerConfigFromEnv, workerEnvSchema, type WorkerConfig } from './config.ts';
import { startRelayProcess } from './relay-process.ts';
import { startWorker, type Readiness, type WorkerHandle } from './worker.ts';

/** How long a scrape during start-up waits for the worker's metrics before it gets what is registered. */
const METRICS_WAIT_MS = 5_000;
/** After the stop's own bound, for the admin port's close and the trace exporter's flush. */
const EXIT_MARGIN_MS = 3_000;
const STARTING: Readiness = { ready: false, checks: { started: 'the worker is starting: waiting for the broker and the database' } };

const env = loadConfigOrExit(workerEnvSchema);
let config: WorkerConfig;
try {
  config = workerConfigFromEnv(env);
} catch (error) {
  if (!(error instanceof SourcesConfigError)) throw error;
  console.error(error.message);
  process.exit(1);
}
// One log line per event, held and written together (stdoutDestination, LOG_BUFFER_BYTES).
const logger = createLogger({ name: 'worker', level: config.logLevel }, stdoutDestination(config.logBufferBytes));
const tracing = startTracingOrExit(process.env, 'worker');

let stopping = false;
// WORKER_ROLE=relay runs the outbox relay alone (relay-process.ts); all and apply, the worker.
let worker: Pick<WorkerHandle, 'healthy' | 'readiness' | 'close'> | undefined;
let admin: AdminServer | undefined;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  // `on`, not `once`: a second signal during the drain is ignored instead of killing the process.
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    if (worker === undefined) process.exit(0);
    // close() keeps to WORKER_STOP_TIMEOUT_MS; what follows it (the admin port, the trace exporter's
    // last flush, which waits up to its own export timeout) gets a few seconds more, then the
    // process ends anyway, inside the orchestrator's grace period.
    setTimeout(
      () => {
        console.error('worker still stopping past WORKER_STOP_TIMEOUT_MS and its exit margin: exiting');
        process.exit(0);
      },
      (config.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS) + EXIT_MARGIN_MS,
    ).unref();
    // Readiness is 503 from here on (worker.close() says so first); the admin port closes last.
    worker
      .close()
      .then(() => admin?.close())
      .then(() => tracing.shutdown())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          console.error(error);
          process.exit(1);
        },
      );
  });
}

// The admin port answers from the first moment, before the broker and the database do. Liveness
// is this process: a worker waiting for its broker needs no restart, so an orchestrator must not
// see a refused probe and restart it. Readiness is 503 until the worker runs, then the worker's.
const registry = new Registry();
let markStarted: () => void = () => {};
const started = new Promise<void>((resolve) => (markStarted = resolve));
try {
  admin = await startAdminServer({
    port: config.adminPort,
    ...(config.adminHost === undefined ? {} : { host: config.adminHost }),
    registry,
    logger,
    healthy: () => worker?.healthy() ?? true,
    ready: () => worker?.readiness() ?? Promise.resolve(STARTING),
    // The worker registers its metrics as it starts; a scrape meanwhile waits for the whole set.
    metricsReady: () => Promise.race([started, new Promise((resolve) => setTimeout(resolve, METRICS_WAIT_MS).unref())]),
  });
} catch (error) {
  logger.error({ err: error, port: config.adminPort }, 'admin server could not listen');
  process.exit(1);
}

// A worker started while the broker or the database is still coming up (a restart of either, a
// whole bridge booting) waits for them, with capped backoff, instead of exiting: startWorker
// leaves nothing behind when it fails, so it is simply tried again.
for (let attempt = 1; worker === undefined && !stopping; attempt += 1) {
  try {
    // CRASH with restart=false: exit so the supervisor restarts a fresh process.
    const deps = { logger, tracing, registry, adminServer: false, onFatal: () => process.exit(1) };
    worker = config.role === 'relay' ? await startRelayProcess(config, deps) : await startWorker(config, deps);
    markStarted();
  } catch (error) {
    // The failed attempt's metrics go with it (the next one registers them again).
    registry.clear();
    const delayMs = Math.min(1_000 * 2 ** (attempt - 1), 15_000);
    logger.warn({ err: error, attempt, retry_in_ms: delayMs }, 'worker could not start (broker or database unavailable?); trying again');
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
}
