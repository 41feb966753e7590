import { describe, expect, it } from 'vitest';
import { noCrashPoints } from '#services/worker/crash-points.ts';
import { OutboxRelay, relayParts } from '#services/worker/relay/index.ts';
import { countUnpublishedOutbox, readNextOutbox, recordOutboxBatch } from '#domain/store/outbox.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { useTestDatabase } from '../kit/db.ts';
import { readTopic, testKafka, useTestTopics } from '../kit/kafka.ts';
import { sleep } from '../kit/eventually.ts';

// The relay's cursor must never pass a row that a still-open transaction will commit later
// (migration 0002): a row becomes readable only once every older transaction has ended.
describe('outbox cursor: a late commit is never skipped', () => {
  const db = useTestDatabase();

  const insert = (client: { query: (sql: string, values: unknown[]) => Promise<unknown> }, eventId: string) =>
    client.query(
      `INSERT INTO applied_outbox (event_id, key, payload, source_topic, source_partition, source_offset)
       VALUES ($1, 'tenant/theme/' || $1, '{}', 'theme.events', 0, 0)`,
      [eventId],
    );
  const next = async () => (await readNextOutbox(db.pool, { limit: 100, maxBytes: 1 << 20 })).rows;
  // xmin is cluster-wide: another test's open transaction (other database) may hold rows back for
  // a moment, so a positive read waits until something is readable.
  const nextWhenReady = async (expected: number) => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const rows = await next();
      if (rows.length >= expected || Date.now() > deadline) return rows;
      await sleep(50);
    }
  };
  const advance = async (rows: Array<{ tx: string; id: string }>) => {
    const last = rows.at(-1)!;
    await recordOutboxBatch(db.pool, { last, records: rows.length, cluster: null });
  };

  it('holds back rows of later transactions until an earlier one commits, then reads both in order', async () => {
    const early = await db.pool.connect();
    try {
      await early.query('BEGIN');
      await insert(early, 'evt_early'); // gets its transaction id now, commits last
      await insert(db.pool, 'evt_late'); // a later transaction, committed at once

      // evt_late is committed, but an older transaction is still open: nothing is readable yet.
      expect(await next()).toEqual([]);
      expect(await countUnpublishedOutbox(db.pool)).toBe(1);

      await early.query('COMMIT');
      const rows = await nextWhenReady(2);
      expect(rows.map((r) => r.event_id)).toEqual(['evt_early', 'evt_late']);
      await advance(rows);
      expect(await next()).toEqual([]);
      expect(await countUnpublishedOutbox(db.pool)).toBe(0);
    } finally {
      early.release();
    }
  });

  it('a rolled-back transaction leaves no gap that stops the cursor', async () => {
    const aborted = await db.pool.connect();
    try {
      await aborted.query('BEGIN');
      await insert(aborted, 'evt_aborted');
      await insert(db.pool, 'evt_after_abort');
      await aborted.query('ROLLBACK');
    } finally {
      aborted.release();
    }
    const rows = await nextWhenReady(1);
    expect(rows.map((r) => r.event_id)).toEqual(['evt_after_abort']);
    await advance(rows);
  });
});

describe('outbox relay: an open transaction holding records back is named in the log', () => {
  const db = useTestDatabase();
  const kafka = testKafka();
  const { names } = useTestTopics(kafka);

  it('warns with the blocking backend once the wait passes the threshold, then publishes both in order', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger(
      { name: 'test', level: 'warn' },
      { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    const relay = new OutboxRelay({
      pool: db.pool,
      ...relayParts({ kafka, databaseUrl: db.url, transactionalId: `${names.applied}.relay`, logger, sendTimeoutMs: 10_000 }),
      topic: names.applied,
      batchSize: 100,
      pollMs: 50,
      sendTimeoutMs: 10_000,
      logger,
      crashPoints: noCrashPoints,
      heldBackWarnMs: 300,
    });
    const insert = (client: { query: (sql: string, values: unknown[]) => Promise<unknown> }, eventId: string) =>
      client.query(
        `INSERT INTO applied_outbox (event_id, key, payload, source_topic, source_partition, source_offset)
         VALUES ($1, 'tenant/theme/held', $2, 'theme.events', 0, 0)`,
        [eventId, JSON.stringify({ event_id: eventId })],
      );
    const open = await db.pool.connect();
    try {
      await open.query('BEGIN');
      await insert(open, 'evt_open');
      const pid = (await open.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await insert(db.pool, 'evt_committed');
      const deadline = Date.now() + 5_000;
      while (!lines.some((l) => (l['oldest_open_transaction'] as { pid?: number } | null)?.pid === pid) && Date.now() < deadline) {
        expect(await relay.publishOnce()).toBe(0);
        await sleep(50);
      }
      const warning = lines.find((l) => (l['oldest_open_transaction'] as { pid?: number } | null)?.pid === pid);
      expect(warning?.['msg']).toMatch(/held back/);
      await open.query('COMMIT');
    } finally {
      open.release();
    }
    let published = 0;
    for (const deadline = Date.now() + 15_000; published < 2 && Date.now() < deadline;) published += await relay.publishOnce();
    expect(published).toBe(2);
    await relay.stop();
    const records = await readTopic(kafka, names.applied);
    expect(records.map((r) => r.headers['event-id'])).toEqual(['evt_open', 'evt_committed']);
  });
});
