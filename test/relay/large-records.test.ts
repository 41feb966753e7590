import { describe, expect, it } from 'vitest';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { countUnpublishedOutbox } from '#domain/store/outbox.ts';
import { sampleThemeEvent, sampleThemeSnapshot } from '#domain/contract/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { readTopic } from '../kit/kafka.ts';
import { useTestRelay } from '../kit/relay.ts';
import { sleep } from '../kit/eventually.ts';
import { sourceRecord } from '../kit/worker.ts';

const EVENTS = 40;
const DESCRIPTION_BYTES = 120 * 1024;

/**
 * Regression: the relay read up to RELAY_BATCH_SIZE (500) rows and sent them in one transaction,
 * one record batch per partition. With large snapshots that batch passes the broker's
 * message.max.bytes (1 MiB by default) and the broker refuses the whole send, every pass again:
 * the relay stopped publishing anything, for every resource, until the rows were pruned by hand.
 * It also held all those payloads in memory at once. Batches are now bounded in bytes too.
 */
describe('outbox relay with large applied records', () => {
  const logger = createLogger({ name: 'relay', level: 'error' });
  const { db, kafka, applied, relay } = useTestRelay({ topics: { retryLevels: 0, eventsPartitions: 1 }, logger, batchSize: 500 });

  it('publishes every record when a batch of them would pass the broker’s request size', async () => {
    const records: SourceRecord[] = Array.from({ length: EVENTS }, (_, i) => {
      const event = sampleThemeEvent({
        resource: { id: `thm_large-${i}`, version: 1 },
        data: { ...sampleThemeSnapshot(), description: 'x'.repeat(DESCRIPTION_BYTES) },
      });
      return sourceRecord(event, i);
    });
    const results = await new SnapshotApplier({ pool: db.pool }).applyBatch(records);
    expect(results.every((r) => r.outcome === 'applied')).toBe(true);

    let passes = 0;
    for (const deadline = Date.now() + 60_000; (await countUnpublishedOutbox(db.pool)) > 0 && Date.now() < deadline; passes += 1) {
      // Rows are readable once every older transaction on the cluster ended (migration 0002).
      if ((await relay.publishOnce()) === 0) await sleep(50);
    }
    expect(await countUnpublishedOutbox(db.pool)).toBe(0);
    const published = await readTopic(kafka, applied);
    expect(published).toHaveLength(EVENTS);
    expect(new Set(published.map((r) => r.key)).size).toBe(EVENTS);
    expect(passes).toBeGreaterThan(1);
  }, 120_000);
});
