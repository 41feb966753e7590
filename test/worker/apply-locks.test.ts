import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { beginApplyAndLock } from '#domain/store/chunk.ts';
import { useTestDatabase } from '../kit/db.ts';
import { sleep } from '../kit/eventually.ts';

// BEGIN and the resource-key locks go to Postgres as one simple query, the keys inlined as escaped
// literals. The locks must be exactly the ones a parameterised statement took (hashtextextended of
// each key, so every applier agrees whatever the key holds) and must serialise two appliers.
describe('BEGIN with the resource-key locks', () => {
  const db = useTestDatabase();

  const awkward = ['t1/theme/plain', "t1/theme/o'quote", 't1/theme/back\\slash', 't1/theme/ünï cödé', 't1/theme/"dq"', 't1/theme/$1 ; --'];

  // Plain keys are inlined without pg's escaping; a set with one awkward key takes it for all.
  it.each([
    ['awkward characters included', awkward],
    ['plain keys only', awkward.filter((k) => !/['\\]/.test(k))],
  ])('locks exactly hashtextextended(key, 7261) of every key, %s', async (_name, keys) => {
    const a = new pg.Client({ connectionString: db.url });
    const b = new pg.Client({ connectionString: db.url });
    await a.connect();
    await b.connect();
    try {
      const { rows: pid } = await a.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await a.query(beginApplyAndLock(keys));
      const { rows: expected } = await b.query<{ h: string }>(
        'SELECT DISTINCT hashtextextended(k, 7261)::text AS h FROM unnest($1::text[]) AS k ORDER BY 1',
        [keys],
      );
      // A bigint advisory lock is kept as classid (high 32 bits) and objid (low 32 bits).
      const { rows: held } = await b.query<{ h: string }>(
        `SELECT ((classid::bigint << 32) | objid::bigint)::text AS h FROM pg_locks
         WHERE locktype = 'advisory' AND objsubid = 1 AND pid = $1 ORDER BY 1`,
        [pid[0]!.pid],
      );
      expect(held.map((r) => r.h).sort()).toEqual(expected.map((r) => r.h).sort());
      expect(held).toHaveLength(keys.length);
      // Still inside the transaction: the locks last until COMMIT.
      const { rows: tx } = await a.query<{ open: boolean }>('SELECT now() = statement_timestamp() AS open');
      expect(tx[0]!.open).toBe(false);
      await a.query('COMMIT');
      const { rows: after } = await b.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = $1", [pid[0]!.pid]);
      expect(after).toHaveLength(0);
    } finally {
      await a.end();
      await b.end();
    }
  });

  it('makes a second applier with a shared key wait until the first commits', async () => {
    const a = new pg.Client({ connectionString: db.url });
    const b = new pg.Client({ connectionString: db.url });
    await a.connect();
    await b.connect();
    try {
      await a.query(beginApplyAndLock(["t1/theme/o'quote", 't1/theme/only-a']));
      let bLocked = false;
      const second = b.query(beginApplyAndLock(['t1/theme/only-b', "t1/theme/o'quote"])).then(() => {
        bLocked = true;
      });
      await sleep(300);
      expect(bLocked).toBe(false);
      await a.query('COMMIT');
      await second;
      expect(bLocked).toBe(true);
      await b.query('COMMIT');
    } finally {
      await a.end();
      await b.end();
    }
  });
});
