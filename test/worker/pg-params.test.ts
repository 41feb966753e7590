import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PackedBytes, textArray } from '#domain/store/columns.ts';
import { useTestDatabase } from '../kit/db.ts';

// A fresh seed each run, printed; FC_SEED=<n> replays a failing one.
const SEED = process.env.FC_SEED === undefined ? Date.now() ^ (Math.random() * 0x7fffffff) : Number(process.env.FC_SEED);

// The apply statements' parameter encodings, read back by a real Postgres: every text element and
// every packed value must arrive unchanged (quotes, backslashes, braces, "NULL", non-ASCII, empty).
describe('apply parameters through Postgres', () => {
  const db = useTestDatabase();

  it('reads back every text element and every packed value unchanged', async () => {
    console.log(`[pg-params] seed ${SEED} (replay: FC_SEED=${SEED})`);
    const texts = fc.sample(fc.option(fc.string({ unit: 'grapheme' }), { nil: null }), { numRuns: 500, seed: SEED });
    texts.push('NULL', '"', '\\', '{a,b}', ' padded ', '');
    const blobs = fc.sample(fc.option(fc.string({ unit: 'grapheme', maxLength: 300 }), { nil: null }), {
      numRuns: texts.length,
      seed: SEED + 1,
    });
    const packed = new PackedBytes();
    for (const b of blobs) packed.add(b);
    const { rows } = await db.pool.query<{ t: string | null; b: string | null }>(
      `SELECT t, CASE WHEN l < 0 THEN NULL ELSE convert_from(substring($2::bytea FROM o FOR l), 'UTF8') END AS b
       FROM unnest($1::text[], $3::int[], $4::int[]) WITH ORDINALITY AS r(t, o, l, n) ORDER BY n`,
      [textArray(texts), ...packed.params()],
    );
    expect(
      rows.map((r) => r.t),
      `FC_SEED=${SEED}`,
    ).toEqual(texts);
    expect(
      rows.map((r) => r.b),
      `FC_SEED=${SEED}`,
    ).toEqual(blobs);
  });

  it('reads back a column with no NULL (the literal then takes its one-join shortcut) and an all-NULL one', async () => {
    // Without quotes or backslashes, so the whole column takes the shortcut.
    const plain = fc.sample(fc.string({ unit: 'grapheme' }), { numRuns: 500, seed: SEED + 2 }).filter((t) => !/["\\]/.test(t));
    plain.push('NULL', '{a,b}', ' padded ', '', ',');
    const nulls = plain.map(() => null);
    const { rows } = await db.pool.query<{ t: string; n: string | null }>(
      'SELECT t, n FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS r(t, n, i) ORDER BY i',
      [textArray(plain), textArray(nulls)],
    );
    expect(
      rows.map((r) => r.t),
      `FC_SEED=${SEED}`,
    ).toEqual(plain);
    expect(rows.map((r) => r.n)).toEqual(nulls);
  });
});
