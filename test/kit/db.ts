// Databases for tests: each file gets its own, cloned from the template that global-setup migrated,
// and drops it when done (useTestDatabase does both).
import { inject } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { withDatabase } from './infra.ts';
import { suiteFixture, type FixtureOptions } from './fixture.ts';
import { createPool } from '#plumbing/db/pool.ts';

export interface TestDatabase {
  url: string;
  name: string;
  pool: pg.Pool;
  drop: () => Promise<void>;
}

/**
 * A fresh database, dropped by its `drop`: cloned from the migrated template (one per test file),
 * or, with `empty`, without migrations, for tests of the migrator itself.
 */
export async function createTestDatabase({ empty = false }: { empty?: boolean } = {}): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `${empty ? 'bridge_e' : 'bridge_t'}_${randomBytes(5).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(empty ? `CREATE DATABASE ${name}` : `CREATE DATABASE ${name} TEMPLATE ${inject('pgTemplateDb')}`);
  const url = withDatabase(adminUrl, name);
  const pool = createPool({ url, max: 5, applicationName: 'bridge-test' });
  return {
    url,
    name,
    pool,
    drop: async () => {
      await pool.end();
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** A test database for the suite: created before its first test, dropped after its last. */
export function useTestDatabase(options: { empty?: boolean } & FixtureOptions = {}): TestDatabase {
  return suiteFixture(
    () => createTestDatabase(options),
    (db) => db.drop(),
    options,
  );
}
