import { loadConfigOrExit } from '../../shared/config/env.ts';
import { SourcesConfigError } from '../../shared/sources/index.ts';
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

const ingress = await startIngress(config);

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    if (stopping) return;
    stopping = true;
    ingress.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  });
}
