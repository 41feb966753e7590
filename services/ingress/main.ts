import { pino } from 'pino';
import { loadConfigOrExit } from '#plumbing/config/env.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { startTracingOrExit } from '#plumbing/observability/tracing.ts';
import { SourcesConfigError } from '#domain/sources/index.ts';
import { ingressConfigFromEnv, ingressEnvSchema } from './config.ts';
import { startIngress } from './ingress.ts';

const env = loadConfigOrExit(ingressEnvSchema);
let config;
try {
  config = ingressConfigFromEnv(env);
} catch (error) {
  if (error instanceof SourcesConfigError) {
    console.error(error.message);
    process.exit(1);
  }
  throw error;
}

// One log line per request: asynchronous writes coalesce lines under load instead of a write
// syscall each, and pino flushes the buffer synchronously when the process exits.
const logger = createLogger({ name: 'ingress', level: config.logLevel }, pino.destination({ dest: 1, sync: false }));
const tracing = startTracingOrExit(process.env, 'ingress');
const ingress = await startIngress(config, { logger, tracing });

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    if (stopping) return;
    stopping = true;
    ingress
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
