import { describe, expect, it } from 'vitest';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { countUnpublishedOutbox } from '#domain/store/outbox.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { readTopic } from '../kit/kafka.ts';
import { useTestRelay } from '../kit/relay.ts';
import { appliedLedgerProblems } from '../kit/ledger.ts';
import { sleep } from '../kit/eventually.ts';
import { sourceRecord } from '../kit/worker.ts';

const SHIFT = 5_000_000_000;

/**
 * Regression (security review, "restore leftover"): the re-baseline after a dump and restore
 * renumbered only the rows whose tx lay at or beyond the new cluster's horizon. When the old
 * cluster's ids overlap the new one's, rows the old cluster had published below that horizon kept
 * their tx, sorted after the new cursor, and were published again after newer records of their
 * key: K v1, v2, v3, then v1 again, and compaction keeps v1.
 */
describe('outbox relay after a restore into a cluster whose transaction ids overlap', () => {
  const { db, kafka, applied, relay } = useTestRelay({
    topics: { retryLevels: 0 },
    logger: createLogger({ name: 'relay', level: 'silent' }),
    batchSize: 100,
  });

  let offset = 0;
  const apply = async (id: string, version: number) => {
    const event = sampleThemeEvent({ resource: { id, version } });
    offset += 1;
    const record: SourceRecord = sourceRecord(event, offset);
    await new SnapshotApplier({ pool: db.pool }).applyBatch([record]);
  };
  const drain = async () => {
    for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
      if ((await relay.publishOnce()) > 0) continue;
      // Rows become readable once every older transaction on the cluster ended (migration 0002).
      if ((await countUnpublishedOutbox(db.pool)) === 0) return;
      await sleep(100);
    }
    throw new Error('the relay did not publish every row within 60 s (held back by a transaction open on the cluster?)');
  };

  it('publishes what the old cluster had not, once, and nothing it had published again', async () => {
    await apply('overlap', 1);
    await drain();
    await apply('overlap', 2);
    await drain();
    await apply('overlap', 3); // applied on the old cluster, not yet published when it was dumped
    const { rows } = await db.pool.query<{ id: string }>(
      "SELECT id::text AS id FROM applied_outbox WHERE key LIKE '%/overlap' ORDER BY id",
    );
    const second = rows[1]!.id;

    // The restore: on the old cluster, v1 had a transaction id the new cluster has already handed
    // out, v2 (the cursor) and v3 ids it has not. Every row is rewritten, as a restore writes them.
    await db.pool.query(`UPDATE applied_outbox SET tx = CASE WHEN id >= $2 THEN (tx::text::bigint + $1)::text::xid8 ELSE tx END`, [
      SHIFT,
      second,
    ]);
    await db.pool.query(
      `UPDATE applied_outbox_batches SET last_tx = CASE WHEN last_id >= $2 THEN (last_tx::text::bigint + $1)::text::xid8 ELSE last_tx END`,
      [SHIFT, second],
    );

    await apply('fresh', 1);
    await drain();

    const records = await readTopic(kafka, applied);
    const versions = (id: string) =>
      records
        .filter((r) => r.key.endsWith(`/${id}`))
        .map((r) => (JSON.parse(r.value.toString()) as { resource: { version: number } }).resource.version);
    expect(versions('overlap')).toEqual([1, 2, 3]);
    expect(versions('fresh')).toEqual([1]);
    expect(await appliedLedgerProblems({ pool: db.pool, kafka, appliedTopic: applied, accepted: [] })).toEqual([]);
  });
});
