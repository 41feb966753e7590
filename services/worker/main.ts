import { loadConfigOrExit } from '../../shared/config/env.ts';
import { workerConfigFromEnv, workerEnvSchema } from './config.ts';
import { startWorker } from './worker.ts';

const env = loadConfigOrExit(workerEnvSchema);
const config = workerConfigFromEnv(env);
// CRASH with restart=false: exit so the supervisor restarts a fresh process.
const worker = await startWorker(config, { onFatal: () => process.exit(1) });

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    if (stopping) return;
    stopping = true;
    worker.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  });
}
