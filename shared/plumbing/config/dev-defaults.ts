// Where `npm start` found (or started) the broker and Postgres, recorded under .cache/ so that
// `npm run bridge` and `npm run console` reach the same ones with no variable to set: on a machine
// without a local PostgreSQL, `npm start` runs an embedded one on 54329, not the 5432 default.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

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
export function devEndpointsPath(repoRoot: string, env: Record<string, string | undefined> = process.env): string {
  return path.join(env.BRIDGE_CACHE_DIR ?? path.join(repoRoot, '.cache'), DEV_ENDPOINTS_FILE);
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
