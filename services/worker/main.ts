import { loadConfigOrExit } from '../../shared/config/env.ts';
import { adminHostEnv, setDefaultAdminHost } from '../../shared/observability/admin-server.ts';
import { workerConfigFromEnv, workerEnvSchema } from './config.ts';
import { startWorker } from './worker.ts';

const env = loadConfigOrExit(workerEnvSchema.extend(adminHostEnv.shape));
// ADMIN_HOST (default 127.0.0.1; a container sets 0.0.0.0): the worker's config has no admin host
// of its own, so it becomes this process's admin server default.
setDefaultAdminHost(env.ADMIN_HOST);
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
