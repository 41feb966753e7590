import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { createPool } from '#plumbing/db/pool.ts';
import { useTestDatabase } from '../kit/db.ts';

describe('database pool session settings', () => {
  const db = useTestDatabase();

  const show = async (pool: pg.Pool, setting: string) => (await pool.query<Record<string, string>>(`SHOW ${setting}`)).rows[0]![setting];

  it('keeps the server’s synchronous_commit unless a pool opts out (the relay’s cursor writes)', async () => {
    const plain = new pg.Client({ connectionString: db.url });
    await plain.connect();
    const server = (await plain.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit;
    await plain.end();

    const durable = createPool({ url: db.url, max: 1 });
    const relaxed = createPool({ url: db.url, max: 1, synchronousCommit: false });
    try {
      expect(await show(durable, 'synchronous_commit')).toBe(server);
      expect(await show(relaxed, 'synchronous_commit')).toBe('off');
      // The pool's other session settings still apply alongside the startup option.
      expect(await show(relaxed, 'statement_timeout')).toBe('10s');
    } finally {
      await durable.end();
      await relaxed.end();
    }
  });
});
