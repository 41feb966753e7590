import { loadConfigOrExit } from '#plumbing/config/env.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { startTracingOrExit } from '#plumbing/observability/tracing.ts';
import { SourcesConfigError } from '#domain/sources/index.ts';
import { workerConfigFromEnv, workerEnvSchema, type WorkerConfig } from './config.ts';
import { startWorker, type WorkerHandle } from './worker.ts';

const env = loadConfigOrExit(workerEnvSchema);
let config: WorkerConfig;
try {
  config = workerConfigFromEnv(env);
} catch (error) {
  if (!(error instanceof SourcesConfigError)) throw error;
  console.error(error.message);
  process.exit(1);
}
const logger = createLogger({ name: 'worker', level: config.logLevel });
const tracing = startTracingOrExit(process.env, 'worker');

let stopping = false;
let worker: WorkerHandle | undefined;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    if (stopping) return;
    stopping = true;
    if (worker === undefined) process.exit(0);
    worker
      .close()
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

// A worker started while the broker or the database is still coming up (a restart of either, a
// whole bridge booting) waits for them, with capped backoff, instead of exiting: startWorker
// leaves nothing behind when it fails, so it is simply tried again.
for (let attempt = 1; worker === undefined && !stopping; attempt += 1) {
  try {
    // CRASH with restart=false: exit so the supervisor restarts a fresh process.
    worker = await startWorker(config, { logger, tracing, onFatal: () => process.exit(1) });
  } catch (error) {
    const delayMs = Math.min(1_000 * 2 ** (attempt - 1), 15_000);
    logger.warn({ err: error, attempt, retry_in_ms: delayMs }, 'worker could not start (broker or database unavailable?); trying again');
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
}
