import { describe, expect, it } from 'vitest';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { countUnpublishedOutbox } from '#domain/store/outbox.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { readTopic } from '../kit/kafka.ts';
import { useTestRelay } from '../kit/relay.ts';
import { sleep } from '../kit/eventually.ts';
import { sourceRecord } from '../kit/worker.ts';

// Transaction ids of a cluster that ran for a long while before it was dumped.
const OLD_CLUSTER_SHIFT = 5_000_000_000;

/**
 * Regression: after a dump and restore into a new Postgres cluster, transaction ids restart far
 * below the stored relay cursor (tx, id). Every new outbox row then sorts before the cursor: the
 * relay published nothing, silently, and the outbox-age metric stayed 0.
 */
describe('outbox relay after the database moved to a new cluster (dump and restore)', () => {
  const logLines: string[] = [];
  const logger = createLogger({ name: 'relay', level: 'info' }, { write: (line: string) => logLines.push(line) });
  const { db, kafka, applied, relay } = useTestRelay({ topics: { retryLevels: 0 }, logger, batchSize: 100 });

  let offset = 0;
  const applier = () => new SnapshotApplier({ pool: db.pool });
  const apply = async (id: string, version: number) => {
    const event = sampleThemeEvent({ resource: { id, version } });
    offset += 1;
    const record: SourceRecord = sourceRecord(event, offset);
    await applier().applyBatch([record]);
  };
  const drain = async () => {
    for (let n = -1, passes = 0; n !== 0 && passes < 50; passes += 1) {
      n = await relay.publishOnce();
      if (n === 0) {
        // Rows become readable once every older transaction on the cluster ended (migration 0002).
        const rows = [{ n: await countUnpublishedOutbox(db.pool) }];
        if (rows[0]!.n > 0) {
          n = -1;
          await sleep(100);
        }
      }
    }
  };

  it('re-baselines the cursor, says so, and publishes what came before and after the move, in order', async () => {
    await apply('moved', 1);
    await apply('moved', 2);
    await drain();
    await apply('moved', 3); // applied on the old cluster, not yet published when it was dumped

    // What a restore looks like: every stored tx (rows and cursor) from the old cluster, far above
    // the ids the new cluster hands out now.
    await db.pool.query(`UPDATE applied_outbox SET tx = (tx::text::bigint + $1)::text::xid8`, [OLD_CLUSTER_SHIFT]);
    await db.pool.query(`UPDATE applied_outbox_batches SET last_tx = (last_tx::text::bigint + $1)::text::xid8`, [OLD_CLUSTER_SHIFT]);

    await apply('moved', 4);
    await apply('fresh', 1);
    await drain();

    const records = await readTopic(kafka, applied);
    const versions = (id: string) =>
      records
        .filter((r) => r.key.endsWith(`/${id}`))
        .map((r) => (JSON.parse(r.value.toString()) as { resource: { version: number } }).resource.version);
    expect(versions('moved')).toEqual([1, 2, 3, 4]);
    expect(versions('fresh')).toEqual([1]);
    expect(logLines.some((l) => l.includes('re-baselined'))).toBe(true);
    // And the relay goes on normally from the new cursor.
    await apply('fresh', 2);
    await drain();
    expect(versions('fresh')).toEqual([1]);
    expect((await readTopic(kafka, applied)).filter((r) => r.key.endsWith('/fresh')).length).toBe(2);
  });

  it('re-baselines for a new cluster identity whose transaction ids are already past the cursor, publishing nothing again', async () => {
    await db.pool.query(`UPDATE applied_outbox_batches SET cluster_id = 'another-cluster'`);
    const before = (await readTopic(kafka, applied)).length;
    await apply('adopted', 1);
    await drain();
    const records = await readTopic(kafka, applied);
    // Only the new record: nothing published before is published again.
    expect(records.length).toBe(before + 1);
    expect(records.filter((r) => r.key.endsWith('/adopted')).length).toBe(1);
    const { rows } = await db.pool.query<{ cluster_id: string | null }>(
      'SELECT cluster_id FROM applied_outbox_batches ORDER BY id DESC LIMIT 1',
    );
    expect(rows[0]!.cluster_id).not.toBe('another-cluster');
  });
});
