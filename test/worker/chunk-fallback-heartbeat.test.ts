import { describe, expect, it } from 'vitest';
import { SnapshotApplier, type ApplyResult, type SourceRecord } from '#domain/apply/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { groupCaughtUp, inboxStatus, produce, raw, themeEvent, useWorker } from '../kit/worker.ts';
import { eventually, sleep } from '../kit/eventually.ts';

const RECORDS = 24;
const PER_RECORD_MS = 500; // 12 s one by one: twice the session timeout below

/**
 * The real apply path, made to fail every multi-record chunk (so the worker falls back to one
 * record per transaction) and slow per record, as a chunk with one bad record and a loaded
 * database would be.
 */
class SlowFallbackApplier extends SnapshotApplier {
  override async applyBatch(records: readonly SourceRecord[]): Promise<ApplyResult[]> {
    if (records.length > 1) throw Object.assign(new Error('chunk refused (test)'), { code: '40001' });
    await sleep(PER_RECORD_MS);
    return super.applyBatch(records);
  }
}

/**
 * Regression: the one-by-one fallback after a failed chunk never heartbeated. Longer than the
 * session timeout, the member was evicted, its commit refused, and the chunk fetched again: a loop.
 */
describe('worker: the one-by-one fallback after a failed chunk keeps its group membership', () => {
  const joins: string[] = [];
  const {
    db,
    kafka,
    names: { events },
    groupId,
  } = useWorker({
    topics: { eventsPartitions: 1, retryLevels: 0 },
    config: { sessionTimeoutMs: 6_000, retryLevels: 0 },
    deps: ({ pool }) => ({
      adminServer: false,
      logger: createLogger(
        { name: 'worker', level: 'info' },
        {
          write: (line: string) => {
            if (line.includes('joined consumer group')) joins.push(line);
          },
        },
      ),
      applier: new SlowFallbackApplier({ pool }),
    }),
  });

  it('applies every record of the chunk once, commits, and joins the group only once', async () => {
    const batch = Array.from({ length: RECORDS }, (_, i) => themeEvent('tenant_hb', `r${i}`, 1));
    await produce(kafka, events, batch.map(raw));
    await eventually(() => groupCaughtUp(kafka, groupId, events), { timeoutMs: 90_000, message: 'the group caught up' });
    for (const e of batch) expect((await inboxStatus(db.pool, e.event_id))?.status).toBe('applied');
    expect(joins).toHaveLength(1);
  });
});
