import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Pool } from 'pg';

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

/**
 * Applies forward-only numbered SQL migrations. One function for start-up, tests and the CLI.
 * A session advisory lock serialises concurrent migrators; each migration records itself first,
 * inside its own transaction, so a crash leaves it either fully applied and recorded or neither.
 */
export async function migrate(pool: Pool, options: { dir?: string; dryRun?: boolean } = {}): Promise<MigrateResult> {
  const migrations = await listMigrations(options.dir);
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
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
        const sql = await readFile(m.file, 'utf8');
        await client.query('BEGIN');
        try {
          await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
          await client.query(sql);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw new Error(`migration ${path.basename(m.file)} failed: ${(error as Error).message}`, { cause: error });
        }
      }
      return { applied: pending, alreadyApplied: done.size };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    client.release();
  }
}
