import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEnv } from 'node:util';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { devEndpointsPath, devEndpointVariables, readDevEndpoints } from '#plumbing/config/dev-endpoints.ts';

const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
export const devEnvFile = path.join(repoRoot, 'infra', 'dev', 'dev.env');

export const DEV_DEFAULTS: Readonly<Record<string, string>> = {
  KAFKA_BROKERS: DEFAULTS.dev.kafkaBrokers,
  DATABASE_URL: DEFAULTS.dev.databaseUrl,
};

/** True when started as `npm run bridge -- ...` from this repository (a developer's machine). */
export function runViaNpmScript(env: Record<string, string | undefined>): boolean {
  return env.npm_lifecycle_event === 'bridge';
}

/**
 * Fills unset variables with what `npm start` uses (infra/dev/dev.env, and the broker and database it
 * recorded in .cache/dev-endpoints.json, else the local defaults). Only for `npm run bridge`: an
 * installed `bridge` binary gets no defaults, so in production a missing KAFKA_BROKERS is an
 * error, never a silent connection to localhost.
 */
export function applyDevDefaults(
  env: Record<string, string | undefined>,
  file = devEnvFile,
  endpointsFile = devEndpointsPath(repoRoot, env),
): void {
  const fromFile = existsSync(file) ? (parseEnv(readFileSync(file, 'utf8')) as Record<string, string>) : {};
  const recorded = devEndpointVariables(readDevEndpoints(endpointsFile));
  // The caller's environment always wins over every source of defaults.
  for (const [name, value] of Object.entries({ ...fromFile, ...DEV_DEFAULTS, ...recorded })) {
    if (env[name] === undefined || env[name] === '') env[name] = value;
  }
  if (env.WEBHOOK_SOURCES_FILE && !path.isAbsolute(env.WEBHOOK_SOURCES_FILE)) {
    env.WEBHOOK_SOURCES_FILE = path.join(repoRoot, env.WEBHOOK_SOURCES_FILE);
  }
}
