import { describe, expect, it } from 'vitest';
import { resourceKey } from '#domain/contract/index.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { failureSettingsFrom, failuresEnv } from '#domain/failures/index.ts';
import { parseConfig } from '#plumbing/config/env.ts';
import { topicRecordCount } from '../kit/kafka.ts';
import { groupCaughtUp, inboxStatus, outboxDrained, produce, raw, themeEvent, useWorker } from '../kit/worker.ts';
import { eventually } from '../kit/eventually.ts';

const T = 'tenant_stuck';
// How long the server lets a session sit idle inside a transaction (the bridge's pools set it).
const IDLE_IN_TRANSACTION_MS = 8_000;

/**
 * Regression: a frozen worker (here: a session of a bridge pool that took a resource's lock and
 * wrote, then went silent inside its transaction) kept its advisory lock and the snapshot horizon.
 * The other worker's lock timeouts walked the retry chain into the DLQ, and the relay published
 * nothing. Now the server ends such a session (idle_in_transaction_session_timeout on every
 * pool), and a lock or statement timeout pauses the consumer like an outage instead of routing.
 */
describe('failures: a stuck session holding a resource lock', () => {
  // Lock waits give up after 2 s (lock_timeout = min(statement timeout, 5 s)), well before the stuck session ends.
  const { db, kafka, names, groupId } = useWorker({
    config: (names) => ({
      failures: failureSettingsFrom(parseConfig(failuresEnv, { RETRY_DELAYS_MS: '200,200,200,200', RETRY_JITTER: '0' })),
      retryLevels: names.retries.length,
      statementTimeoutMs: 2_000,
    }),
  });

  it('applies the blocked event once the stuck session is ended, with nothing in the retry chain or the DLQ', async () => {
    const blocked = themeEvent(T, 'blocked', 1);
    const others = Array.from({ length: 5 }, (_, i) => themeEvent(T, `free${i}`, 1));
    // A session of a bridge pool, as a frozen worker's would be: lock taken, a row written (so it
    // holds back the relay's snapshot horizon too), then silence.
    const frozenPool = createPool({
      url: db.url,
      max: 1,
      applicationName: 'frozen-worker',
      idleInTransactionTimeoutMs: IDLE_IN_TRANSACTION_MS,
    });
    frozenPool.on('error', () => {});
    const frozen = await frozenPool.connect();
    frozen.on('error', () => {});
    await frozen.query('BEGIN');
    await frozen.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 7261))', [resourceKey(blocked)]);
    await frozen.query(
      `INSERT INTO applied_outbox (event_id, key, payload, source_topic, source_partition, source_offset) VALUES ('evt_frozen', 'x/theme/x', '{}', 't', 0, 0)`,
    );
    const started = Date.now();
    try {
      await produce(kafka, names.events, [raw(blocked), ...others.map(raw)]);
      await eventually(async () => (await inboxStatus(db.pool, blocked.event_id))?.status === 'applied', {
        timeoutMs: 60_000,
        message: 'the blocked event applied',
      });
      const waited = Date.now() - started;
      await eventually(() => groupCaughtUp(kafka, groupId, names.events), { timeoutMs: 30_000, message: 'the main group caught up' });
      for (const e of others) expect((await inboxStatus(db.pool, e.event_id))?.status).toBe('applied');
      await eventually(() => outboxDrained(db.pool), { timeoutMs: 30_000, message: 'the outbox published' });
      expect(await topicRecordCount(kafka, names.dlq)).toBe(0);
      for (const retry of names.retries) expect(await topicRecordCount(kafka, retry), retry).toBe(0);
      // It waited for the server to end the stuck session, not for a retry to get lucky.
      expect(waited).toBeGreaterThanOrEqual(IDLE_IN_TRANSACTION_MS - 1_000);
    } finally {
      frozen.release(true);
      await frozenPool.end().catch(() => {});
    }
  });
});
