// Databases for tests: each file gets its own, cloned from the template that global-setup migrated,
// and drops it when done.
import { inject } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { withDatabase } from './infra.ts';
import { createPool } from '#plumbing/db/pool.ts';

export interface TestDatabase {
  url: string;
  name: string;
  pool: pg.Pool;
  drop: () => Promise<void>;
}

/** A fresh database cloned from the migrated template: one per test file (call in beforeAll). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const template = inject('pgTemplateDb');
  const name = `bridge_t_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const pool = createPool({ url, max: 5, applicationName: 'bridge-test' });
  return {
    url,
    name,
    pool,
    drop: async () => {
      await pool.end();
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** An empty database (no migrations), for testing the migrator itself. */
export async function createEmptyDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `bridge_e_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(adminUrl, name);
  const pool = createPool({ url, max: 5, applicationName: 'bridge-test' });
  return {
    url,
    name,
    pool,
    drop: async () => {
      await pool.end();
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
