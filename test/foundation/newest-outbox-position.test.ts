import { describe, expect, it } from 'vitest';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { selectNewestOutboxPosition } from '#domain/store/outbox.ts';
import { useTestDatabase } from '../kit/db.ts';
import { sourceRecord } from '../kit/worker.ts';

/**
 * Regression: the newest applied record was found by sorting the text output columns, so id '99'
 * came after '101', and a stopping worker stopped publishing once the relay's cursor passed the
 * wrong row (CI: 273 applied records left unpublished at exit).
 */
describe('selectNewestOutboxPosition', () => {
  const db = useTestDatabase();

  it('is the row with the highest (tx, id), numerically, across a digit boundary', async () => {
    const records: SourceRecord[] = Array.from({ length: 120 }, (_, i) => {
      const event = sampleThemeEvent({ resource: { id: `thm_newest-${i}`, version: 1 } });
      return sourceRecord(event, i);
    });
    const applier = new SnapshotApplier({ pool: db.pool });
    await applier.applyBatch(records.slice(0, 60));
    await applier.applyBatch(records.slice(60));
    const { rows } = await db.pool.query<{ tx: string; id: string }>(
      'SELECT tx::text AS tx, id::text AS id FROM applied_outbox ORDER BY applied_outbox.tx, applied_outbox.id',
    );
    expect(rows).toHaveLength(120);
    expect(Number(rows.at(-1)!.id)).toBeGreaterThanOrEqual(100);
    expect(await selectNewestOutboxPosition(db.pool)).toEqual(rows.at(-1));
  });
});
