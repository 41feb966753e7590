// `npm run console` on a developer's machine: the broker and database `npm start` recorded
// (.cache/dev-endpoints.json), else the local defaults. Only under that npm script: a deployed
// console gets no defaults, so a missing KAFKA_BROKERS is an error, never a silent localhost.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { devEndpointsPath, devEndpointVariables, readDevEndpoints } from '#plumbing/config/dev-endpoints.ts';

const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

export function runViaNpmScript(env: Record<string, string | undefined>): boolean {
  return env.npm_lifecycle_event === 'console';
}

export function applyConsoleDevDefaults(env: Record<string, string | undefined>, endpointsFile = devEndpointsPath(repoRoot, env)): void {
  const defaults = {
    KAFKA_BROKERS: DEFAULTS.dev.kafkaBrokers,
    DATABASE_URL: DEFAULTS.dev.databaseUrl,
    ...devEndpointVariables(readDevEndpoints(endpointsFile)),
  };
  for (const [name, value] of Object.entries(defaults)) {
    if (env[name] === undefined || env[name] === '') env[name] = value;
  }
}
