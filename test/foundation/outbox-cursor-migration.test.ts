import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countUnpublishedOutbox, readNextOutbox, readRelayPosition } from '#domain/store/outbox.ts';
import { defaultMigrationsDir, migrate } from '#domain/store/migrate.ts';
import { useTestDatabase } from '../kit/db.ts';
import { sleep } from '../kit/eventually.ts';

// Migration 0002 replaces applied_outbox.published_at with the relay's cursor. A database that
// ran the old relay must keep every unpublished row unpublished, and lose no published_at.
describe('migration 0002 (outbox cursor) on a database with rows from the old relay', () => {
  const db = useTestDatabase({ empty: true });
  let onlyFirst: string;

  beforeAll(async () => {
    onlyFirst = await mkdtemp(path.join(os.tmpdir(), 'migrations-0001-'));
    await copyFile(path.join(defaultMigrationsDir, '0001_init.sql'), path.join(onlyFirst, '0001_init.sql'));
  });
  afterAll(async () => {
    if (onlyFirst) await rm(onlyFirst, { recursive: true, force: true });
  });

  it('keeps the rows after the first unpublished one pending, and published_at for the rest', async () => {
    await migrate(db.pool, { dir: onlyFirst });
    // ids 1-3 published, 4 not (committed late under the old relay), 5 published, 6 not.
    const published = (n: number) => [1, 2, 3, 5].includes(n);
    for (let n = 1; n <= 6; n += 1) {
      await db.pool.query(
        `INSERT INTO applied_outbox (event_id, key, payload, headers, published_at)
         VALUES ($1, 'tenant/theme/x', '{}', $2::jsonb, $3)`,
        [
          `evt_${n}`,
          JSON.stringify({ 'event-id': `evt_${n}`, 'source-topic': 'theme.events', 'source-partition': '2', 'source-offset': String(n) }),
          published(n) ? new Date(Date.UTC(2026, 10, 1, 0, 0, n)) : null,
        ],
      );
    }
    await migrate(db.pool);

    // 4 and 6 are still to publish; 5 is published again (byte-identical), never skipped.
    expect(await countUnpublishedOutbox(db.pool)).toBe(3);
    const position = await readRelayPosition(db.pool);
    expect(position.id).toBe('3');
    // Readable once every older transaction on the cluster has ended (xmin is cluster-wide, and
    // other test files run transactions at the same time): wait for that.
    const readNext = () => readNextOutbox(db.pool, { limit: 10, maxBytes: 1 << 20 });
    let next = await readNext();
    for (const deadline = Date.now() + 15_000; next.rows.length < 3 && Date.now() < deadline; next = await readNext()) {
      await sleep(50);
    }
    expect(next.rows.map((r) => r.event_id)).toEqual(['evt_4', 'evt_5', 'evt_6']);
    // The headers moved to columns.
    expect(next.rows[0]).toMatchObject({ source_topic: 'theme.events', source_partition: 2, source_offset: '4' });
    const batches = await db.pool.query<{ records: number; published_at: Date }>(
      'SELECT records, published_at FROM applied_outbox_batches',
    );
    expect(batches.rows).toHaveLength(1);
    expect(batches.rows[0]!.published_at.toISOString()).toBe('2026-11-01T00:00:05.000Z');
  });
});
