// What the development commands fill in for a variable left unset, in one place: the dev sources
// and their public secrets (infra/dev/dev.env), and where the broker and Postgres are. `npm start`
// records the ones it found or started under .cache/ so that `npm run bridge` and `npm run console`
// reach the same ones with no variable to set: on a machine without a local PostgreSQL, `npm start`
// runs an embedded one on 54329, not the 5432 default. Only programs started by this repository's
// npm scripts use these: an installed `bridge` or a deployed console gets no defaults, so a missing
// KAFKA_BROKERS is an error, never a silent connection to localhost.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEnv } from 'node:util';
import { z } from 'zod';
import { DEFAULTS } from './defaults.ts';

type Env = Record<string, string | undefined>;

const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..');

/** The development configuration: the dev sources file, their public secrets, the log level. */
export const devEnvFile = path.join(repoRoot, 'infra', 'dev', 'dev.env');

export const DEV_ENDPOINTS_FILE = 'dev-endpoints.json';

const devEndpoints = z.object({
  KAFKA_BROKERS: z.string().min(1),
  DATABASE_URL: z.string().min(1),
  /** The ingress's admin port (metrics), for the console's overview. */
  INGRESS_ADMIN_PORT: z.string().regex(/^\d+$/).optional(),
  recorded_at: z.string().optional(),
  pid: z.number().int().optional(),
});
export type DevEndpoints = z.infer<typeof devEndpoints>;

/** The state file: BRIDGE_CACHE_DIR (as infra/paths.ts reads it) or <repo>/.cache. */
export function devEndpointsPath(root: string = repoRoot, env: Env = process.env): string {
  return path.join(env.BRIDGE_CACHE_DIR ?? path.join(root, '.cache'), DEV_ENDPOINTS_FILE);
}

/** Written atomically and readable by this user only: a DATABASE_URL may carry a password. */
export function writeDevEndpoints(file: string, endpoints: DevEndpoints): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(endpoints, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}

/** The recorded endpoints; undefined when there is no file or it does not parse (then the defaults apply). */
export function readDevEndpoints(file: string): DevEndpoints | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const parsed = devEndpoints.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The recorded endpoints as environment variables (only the ones a program reads). */
export function devEndpointVariables(endpoints: DevEndpoints | undefined): Record<string, string> {
  if (!endpoints) return {};
  return {
    KAFKA_BROKERS: endpoints.KAFKA_BROKERS,
    DATABASE_URL: endpoints.DATABASE_URL,
    ...(endpoints.INGRESS_ADMIN_PORT ? { INGRESS_ADMIN_PORT: endpoints.INGRESS_ADMIN_PORT } : {}),
  };
}

/** The dev env file's variables; none when there is no such file (a release build has none). */
export function devEnvFileVariables(file = devEnvFile): Record<string, string> {
  return existsSync(file) ? (parseEnv(readFileSync(file, 'utf8')) as Record<string, string>) : {};
}

/** Sets each variable `env` leaves unset or empty: the caller's environment always wins. */
function fillUnset(env: Env, values: Record<string, string>): void {
  for (const [name, value] of Object.entries(values)) {
    if (env[name] === undefined || env[name] === '') env[name] = value;
  }
}

/**
 * The start commands (infra/dev): the dev env file only. Where the broker and Postgres are is
 * theirs to find out (an unset KAFKA_BROKERS makes them start a broker).
 */
export function loadDevEnv(env: Env = process.env, file = devEnvFile): void {
  fillUnset(env, devEnvFileVariables(file));
}

/** True when started as `npm run <script>` from this repository (a developer's machine). */
export function runViaNpmScript(env: Env, script: 'bridge' | 'console'): boolean {
  return env.npm_lifecycle_event === script;
}

export interface DevDefaultsFiles {
  envFile?: string;
  endpointsFile?: string;
}

/**
 * `npm run bridge` and `npm run console`: fills unset variables from the dev env file, then the
 * broker and database `npm start` recorded, else the local defaults.
 */
export function applyDevDefaults(
  env: Env,
  { envFile = devEnvFile, endpointsFile = devEndpointsPath(repoRoot, env) }: DevDefaultsFiles = {},
): void {
  const local = { KAFKA_BROKERS: DEFAULTS.dev.kafkaBrokers, DATABASE_URL: DEFAULTS.dev.databaseUrl };
  fillUnset(env, { ...devEnvFileVariables(envFile), ...local, ...devEndpointVariables(readDevEndpoints(endpointsFile)) });
  // The file names it relative to the repository; a command may run from anywhere.
  if (env.WEBHOOK_SOURCES_FILE && !path.isAbsolute(env.WEBHOOK_SOURCES_FILE)) {
    env.WEBHOOK_SOURCES_FILE = path.join(repoRoot, env.WEBHOOK_SOURCES_FILE);
  }
}
