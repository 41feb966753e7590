import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createEmptyDatabase, type TestDatabase } from '../helpers/db.ts';
import { listMigrations, migrate } from '../../shared/db/migrate.ts';
import { createPool } from '../../shared/db/pool.ts';

describe('migrations on the real Postgres', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createEmptyDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

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
    const other = await createEmptyDatabase();
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
});
