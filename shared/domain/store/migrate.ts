import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Pool, PoolClient } from 'pg';

export const defaultMigrationsDir = fileURLToPath(new URL('./migrations/', import.meta.url));

// Arbitrary but fixed: every process that migrates this database serialises on it.
const MIGRATION_LOCK_KEY = 7_261_003_411;

const MIGRATION_FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

export interface Migration {
  version: number;
  name: string;
  file: string;
}

export interface MigrateResult {
  applied: Migration[];
  alreadyApplied: number;
}

export async function listMigrations(dir = defaultMigrationsDir): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = MIGRATION_FILE.exec(file);
    if (!match) throw new Error(`migration file ${file} does not match NNNN_name.sql`);
    const version = Number(match[1]);
    if (migrations.some((m) => m.version === version)) throw new Error(`two migrations share version ${version}`);
    migrations.push({ version, name: match[2]!, file: `${dir}/${file}` });
  }
  return migrations;
}

export interface MigrateOptions {
  dir?: string;
  dryRun?: boolean;
  /**
   * How long one statement may wait for a table lock (default 10 s). A migration queued behind a
   * long query on a busy table would otherwise make every later query on it queue behind the
   * migration; failing fast and retrying later is kinder to the running bridge.
   */
  lockTimeoutMs?: number;
  /** Bound on one statement (default 0: none; the pool's 10 s is for the hot path, not for DDL). */
  statementTimeoutMs?: number;
}

export const DEFAULT_MIGRATION_LOCK_TIMEOUT_MS = 10_000;

/** A migration file whose first line is this runs in two phases (see splitPhases). */
export const CONCURRENT_MARKER = '-- migrate:concurrently';
export const TRANSACTION_MARKER = '-- migrate:then-in-transaction';

/**
 * Applies forward-only numbered SQL migrations. One function for start-up, tests and the CLI.
 * A session advisory lock serialises concurrent migrators; each migration records itself inside
 * the transaction that applies it, so a crash leaves it either fully applied and recorded or
 * neither. A file that starts with `-- migrate:concurrently` first runs its statements one by one
 * outside any transaction (CREATE INDEX CONCURRENTLY, batched backfills that COMMIT as they go;
 * each must be safe to run again), then everything after `-- migrate:then-in-transaction` in one
 * transaction with the record.
 */
export async function migrate(pool: Pool, options: MigrateOptions = {}): Promise<MigrateResult> {
  const migrations = await listMigrations(options.dir);
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      // Session settings: the migrations' own limits, not the pool's (reset on release below).
      await client.query(`SET lock_timeout = ${Math.round(options.lockTimeoutMs ?? DEFAULT_MIGRATION_LOCK_TIMEOUT_MS)}`);
      await client.query(`SET statement_timeout = ${Math.round(options.statementTimeoutMs ?? 0)}`);
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
      const { rows } = await client.query<{ version: number; name: string }>(
        'SELECT version, name FROM schema_migrations ORDER BY version',
      );
      const done = new Map(rows.map((r) => [r.version, r.name]));
      for (const m of migrations) {
        const recorded = done.get(m.version);
        if (recorded !== undefined && recorded !== m.name) {
          throw new Error(`migration ${m.version} was applied as "${recorded}" but the file is now "${m.name}"`);
        }
      }
      const pending = migrations.filter((m) => !done.has(m.version));
      if (options.dryRun) return { applied: pending, alreadyApplied: done.size };
      for (const m of pending) {
        const { concurrent, transactional } = splitPhases(await readFile(m.file, 'utf8'));
        try {
          for (const statement of concurrent) await runConcurrentStatement(client, statement);
          await client.query('BEGIN');
          try {
            await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
            await client.query(transactional);
            await client.query('COMMIT');
          } catch (error) {
            await client.query('ROLLBACK');
            throw error;
          }
        } catch (error) {
          throw new Error(`migration ${path.basename(m.file)} failed: ${(error as Error).message}`, { cause: error });
        }
      }
      return { applied: pending, alreadyApplied: done.size };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      await client.query('RESET lock_timeout; RESET statement_timeout').catch(() => {});
    }
  } finally {
    client.release();
  }
}

/**
 * The versions recorded in schema_migrations (none before the first migrate). Read-only on purpose:
 * migrate({ dryRun }) would still create schema_migrations on a fresh database.
 */
export async function appliedMigrationVersions(pool: Pool): Promise<number[]> {
  const { rows: exists } = await pool.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
  if (!exists[0]?.t) return [];
  const { rows } = await pool.query<{ version: number }>('SELECT version FROM schema_migrations');
  return rows.map((r) => r.version);
}

/**
 * The two phases of a migration file: statements to run one by one outside a transaction (only
 * in a file marked `-- migrate:concurrently`), and the text to run in one transaction.
 */
export function splitPhases(sql: string): { concurrent: string[]; transactional: string } {
  if (!sql.startsWith(CONCURRENT_MARKER)) return { concurrent: [], transactional: sql };
  const at = sql.indexOf(`\n${TRANSACTION_MARKER}`);
  const first = at < 0 ? sql : sql.slice(0, at);
  const rest = at < 0 ? '' : sql.slice(at + 1 + TRANSACTION_MARKER.length);
  return { concurrent: splitStatements(first), transactional: rest };
}

/** Statements end with `;` at the end of a line, outside dollar-quoted bodies (DO $$ ... $$;). */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let current: string[] = [];
  let inDollar = false;
  for (const line of sql.split('\n')) {
    current.push(line);
    const dollars = line.split('$$').length - 1;
    if (dollars % 2 === 1) inDollar = !inDollar;
    if (!inDollar && /;\s*(--.*)?$/.test(line)) {
      const text = current.join('\n').trim();
      if (text.split('\n').some((l) => l.trim() !== '' && !l.trim().startsWith('--'))) statements.push(text);
      current = [];
    }
  }
  const tail = current.join('\n').trim();
  if (tail.split('\n').some((l) => l.trim() !== '' && !l.trim().startsWith('--'))) statements.push(tail);
  return statements;
}

const CONCURRENT_INDEX = /CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+([a-z_][a-z0-9_]*)/i;

/**
 * One statement of the concurrent phase. A CREATE INDEX CONCURRENTLY that was interrupted leaves
 * an invalid index behind, which IF NOT EXISTS would then keep: it is dropped and built again.
 */
async function runConcurrentStatement(client: PoolClient, statement: string): Promise<void> {
  const index = CONCURRENT_INDEX.exec(statement)?.[1];
  if (index !== undefined) {
    const { rows } = await client.query<{ invalid: boolean }>(
      `SELECT NOT i.indisvalid AS invalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
       WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace`,
      [index],
    );
    if (rows[0]?.invalid) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`);
  }
  await client.query(statement);
}
