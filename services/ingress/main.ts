import { loadConfigOrExit } from '#plumbing/config/env.ts';
import { createLogger, stdoutDestination } from '#plumbing/logging/logger.ts';
import { startTracingOrExit } from '#plumbing/observability/tracing.ts';
import { SecretKeyError, SourcesConfigError } from '#domain/sources/index.ts';
import { ingressConfigFromEnv, ingressEnvSchema } from './config.ts';
import { startIngress } from './ingress.ts';

const env = loadConfigOrExit(ingressEnvSchema);
let config;
try {
  config = ingressConfigFromEnv(env);
} catch (error) {
  if (error instanceof SourcesConfigError || error instanceof SecretKeyError) {
    console.error(error.message);
    process.exit(1);
  }
  throw error;
}

// One log line per request, held and written together (stdoutDestination, LOG_BUFFER_BYTES).
const logger = createLogger({ name: 'ingress', level: config.logLevel }, stdoutDestination(config.logBufferBytes));
const tracing = startTracingOrExit(process.env, 'ingress');
const starting = startIngress(config, { logger, tracing });

// Registered before the start completes: a SIGTERM while the ingress starts (an orchestrator
// scaling down at once) still ends in a graceful close and exit 0, not in death by signal.
let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  // `on`, not `once`: a second signal during the drain is ignored instead of killing the process.
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    // close(): readiness 503 and the listener closed at once, in-flight requests answered after
    // their acks, the producer flushed, the admin port closed last.
    starting
      .then((ingress) => ingress.close())
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

// A start that fails (a port in use) is an error: printed, exit 1.
await starting;
