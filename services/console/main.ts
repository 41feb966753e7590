// The operator console: `npm start` runs it beside the ingress and worker; `npm run console` alone.
import { ConfigError } from '#plumbing/config/env.ts';
import { createLogger, stdoutDestination } from '#plumbing/logging/logger.ts';
import { consoleConfigFrom } from './config.ts';
import { applyDevDefaults, runViaNpmScript } from '#plumbing/config/dev-defaults.ts';
import { startConsole } from './console.ts';

if (runViaNpmScript(process.env, 'console')) applyDevDefaults(process.env);
let config: ReturnType<typeof consoleConfigFrom>;
try {
  config = consoleConfigFrom(process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(error.message);
  process.exit(1);
}
const logger = createLogger({ name: 'console', level: config.logLevel }, stdoutDestination(config.logBufferBytes));
const handle = await startConsole(config, { logger });

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'console stopping');
    void handle.close().then(() => process.exit(0));
  });
}
