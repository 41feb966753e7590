import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase, useTestDatabase } from '../kit/db.ts';
import { listMigrations, migrate } from '#domain/store/migrate.ts';
import { createPool } from '#plumbing/db/pool.ts';

describe('migrations on the real Postgres', () => {
  const db = useTestDatabase({ empty: true });

  it('applies every migration once; applied twice is a no-op', async () => {
    const all = await listMigrations();
    const first = await migrate(db.pool);
    expect(first.applied.map((m) => m.version)).toEqual(all.map((m) => m.version));
    const second = await migrate(db.pool);
    expect(second.applied).toEqual([]);
    expect(second.alreadyApplied).toBe(all.length);
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM schema_migrations');
    expect(rows[0].n).toBe(all.length);
  });

  it('serialises concurrent migrators and rolls back a failing migration whole', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'migrations-'));
    writeFileSync(path.join(dir, '0001_widgets.sql'), 'CREATE TABLE widgets (id int PRIMARY KEY);');
    writeFileSync(path.join(dir, '0002_seed.sql'), 'INSERT INTO widgets VALUES (1);');
    const other = await createTestDatabase({ empty: true });
    const second = createPool({ url: other.url, max: 2 });
    try {
      const results = await Promise.all([migrate(other.pool, { dir }), migrate(second, { dir })]);
      expect(results.map((r) => r.applied.length).sort()).toEqual([0, 2]);
      const { rows } = await other.pool.query('SELECT count(*)::int AS n FROM widgets');
      expect(rows[0].n).toBe(1);

      writeFileSync(path.join(dir, '0003_broken.sql'), 'CREATE TABLE gadgets (id int); SELECT no_such_column FROM widgets;');
      await expect(migrate(other.pool, { dir })).rejects.toThrow(/0003_broken\.sql failed/);
      const gadgets = await other.pool.query("SELECT to_regclass('gadgets') AS t");
      expect(gadgets.rows[0].t).toBeNull();
      const versions = await other.pool.query('SELECT version FROM schema_migrations ORDER BY version');
      expect(versions.rows.map((r) => r.version)).toEqual([1, 2]);
    } finally {
      await second.end();
      await other.drop();
    }
  });

  it("has its own timeouts: a long statement outlives the pool's 10 s, a lock wait gives up instead of queueing", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'migrations-'));
    const other = await createTestDatabase({ empty: true });
    // A pool with the hot path's statement timeout, as `bridge migrate` and the services use.
    const pool = createPool({ url: other.url, max: 2, statementTimeoutMs: 1_000 });
    const holder = createPool({ url: other.url, max: 1 });
    try {
      writeFileSync(path.join(dir, '0001_slow.sql'), 'CREATE TABLE busy (id int); SELECT pg_sleep(1.5);');
      await migrate(pool, { dir });
      // Another session holds a lock the next migration needs: it fails after lockTimeoutMs, not never.
      writeFileSync(path.join(dir, '0002_alter.sql'), 'ALTER TABLE busy ADD COLUMN note text;');
      const c = await holder.connect();
      await c.query('BEGIN');
      await c.query('LOCK TABLE busy IN ACCESS SHARE MODE');
      // The lock timeout's own message: it gave up on the lock rather than wait for the holder.
      await expect(migrate(pool, { dir, lockTimeoutMs: 500 })).rejects.toThrow(
        /0002_alter\.sql failed: canceling statement due to lock timeout/,
      );
      await c.query('ROLLBACK');
      c.release();
      expect((await migrate(pool, { dir })).applied.map((m) => m.version)).toEqual([2]);
      // The session settings were reset before the connection went back to the pool.
      const { rows } = await pool.query<{ statement_timeout: string }>('SHOW statement_timeout');
      expect(rows[0]!.statement_timeout).toBe('1s');
    } finally {
      await holder.end();
      await pool.end();
      await other.drop();
    }
  });

  it('runs a concurrently-marked migration outside a transaction first, and rebuilds an index an interrupted run left invalid', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'migrations-'));
    const other = await createTestDatabase({ empty: true });
    try {
      writeFileSync(
        path.join(dir, '0001_table.sql'),
        'CREATE TABLE rows_ (id int, k text); INSERT INTO rows_ SELECT g, (g % 7)::text FROM generate_series(1, 1000) AS g;',
      );
      await migrate(other.pool, { dir });
      // What an interrupted CREATE INDEX CONCURRENTLY leaves: an invalid index of the same name.
      await other.pool.query('CREATE INDEX rows_k ON rows_ (k)');
      await other.pool.query("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'rows_k'::regclass");
      writeFileSync(
        path.join(dir, '0002_index.sql'),
        [
          '-- migrate:concurrently',
          'CREATE INDEX CONCURRENTLY IF NOT EXISTS rows_k ON rows_ (k);',
          'DO $$',
          'BEGIN',
          '  UPDATE rows_ SET k = upper(k) WHERE id <= 500;',
          '  COMMIT;',
          '  UPDATE rows_ SET k = upper(k) WHERE id > 500;',
          'END $$;',
          '-- migrate:then-in-transaction',
          'ALTER TABLE rows_ ADD COLUMN done boolean NOT NULL DEFAULT true;',
        ].join('\n'),
      );
      expect((await migrate(other.pool, { dir })).applied.map((m) => m.version)).toEqual([2]);
      const { rows } = await other.pool.query<{ valid: boolean }>(
        "SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = 'rows_k'::regclass",
      );
      expect(rows[0]!.valid).toBe(true);
      const done = await other.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM rows_ WHERE done');
      expect(done.rows[0]!.n).toBe(1000);
    } finally {
      await other.drop();
    }
  });
});
