import { afterAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { resourceKey, sampleThemeEvent } from '#domain/contract/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { noCrashPoints } from '#services/worker/crash-points.ts';
import { OutboxRelay, relayParts } from '#services/worker/relay/index.ts';
import { useTestDatabase } from '../kit/db.ts';
import { readTopic, testKafka, useTestTopics } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { appliedLedgerProblems } from '../kit/ledger.ts';
import { sleep } from '../kit/eventually.ts';
import { sourceRecord } from '../kit/worker.ts';

/**
 * Regression (security review, "read before fence"): a relay that became leader read its rows,
 * then froze past the leadership timeout. Another worker took over and published the same row
 * and a newer one. On waking, the first relay initialised its transactional ids only then (the
 * fence came after the read), which fenced the new leader instead of itself, and committed its
 * stale rows last: K v1, K v2, K v1, and compaction keeps v1.
 *
 * The freeze is played without stopping the process: the first relay's outbox read is held after
 * it returned, and its leader session is ended by the server as idle_session_timeout would end
 * the session of a frozen process.
 */
describe('outbox relay: a leader frozen between its read and its send', () => {
  const kafka = testKafka(uniqueName('fence-read'));
  const applied = useTestTopics(kafka, { eventsPartitions: 3, retryLevels: 0 }).names.applied;
  const db = useTestDatabase();
  const relays: OutboxRelay[] = [];

  afterAll(async () => {
    for (const r of relays) await r.stop().catch(() => {});
  });

  /**
   * A pool whose first outbox read that finds rows returns only once thaw() is called (the
   * freeze). Reads that find none (rows held back by a transaction open elsewhere on the shared
   * cluster) go through.
   */
  function freezingPool(pool: pg.Pool) {
    let thaw: () => void = () => {};
    const hold = new Promise<void>((resolve) => (thaw = resolve));
    let reached: () => void = () => {};
    const readHeld = new Promise<void>((resolve) => (reached = resolve));
    const state = { held: false };
    const query = async (config: pg.QueryConfig) => {
      const result = await pool.query(config);
      const found = (result.rows[0] as { id?: unknown } | undefined)?.id;
      if (!state.held && typeof config === 'object' && config.text.includes('bytes_through') && found != null) {
        state.held = true;
        reached();
        await hold;
      }
      return result;
    };
    const frozen = new Proxy(pool, { get: (target, prop) => (prop === 'query' ? query : Reflect.get(target, prop)) });
    return { pool: frozen, readHeld, thaw, state };
  }

  function relay(name: string, pool: pg.Pool): OutboxRelay {
    const logger = createLogger({ name, level: process.env.TEST_LOG_LEVEL ?? 'silent' });
    const r = new OutboxRelay({
      pool,
      ...relayParts({
        kafka: testKafka(uniqueName(name)),
        databaseUrl: db.url,
        transactionalId: `${applied}.relay`,
        logger,
        sendTimeoutMs: 10_000,
        leaderIdleTimeoutMs: 4_000,
      }),
      topic: applied,
      batchSize: 20,
      pollMs: 20,
      sendTimeoutMs: 10_000,
      logger,
      crashPoints: noCrashPoints,
    });
    relays.push(r);
    return r;
  }

  it('never lets the stale leader land an older record after the new leader published newer ones', async () => {
    const applier = new SnapshotApplier({ pool: db.pool });
    const id = uniqueName('thm');
    const apply = async (version: number) => {
      const event = sampleThemeEvent({ resource: { id, version } });
      const record: SourceRecord = sourceRecord(event, version);
      await applier.applyBatch([record]);
      return resourceKey(event);
    };
    const key = await apply(1);

    // A becomes leader and reads K v1; then it "freezes".
    const freeze = freezingPool(db.pool);
    const a = relay('relay-a', freeze.pool);
    const stale = (async () => {
      for (;;) {
        const published = await a.publishOnce();
        if (freeze.state.held) return { published };
        await sleep(50);
      }
    })().catch((error: unknown) => ({ error: String(error) }));
    await freeze.readHeld;

    // The server ends the frozen leader's session (idle_session_timeout), which frees the lock.
    const { rowCount } = await db.pool.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'worker-relay-leader' AND datname = current_database()",
    );
    expect(rowCount).toBe(1);

    // B takes over and publishes K v1, then K v2.
    const b = relay('relay-b', db.pool);
    const publish = async () => {
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        if ((await b.publishOnce()) > 0) return;
        await sleep(100);
      }
      throw new Error('relay B published nothing');
    };
    await publish();
    await apply(2);
    await publish();

    // A wakes and goes on with what it read.
    freeze.thaw();
    const outcome = await stale;
    console.log(`relay A after the freeze: ${JSON.stringify(outcome)}`);

    const versions = (await readTopic(kafka, applied))
      .filter((r) => r.key === key)
      .map((r) => (JSON.parse(r.value.toString()) as { resource: { version: number } }).resource.version);
    expect(versions, `relay A: ${JSON.stringify(outcome)}`).toEqual([1, 2]);
    expect(await appliedLedgerProblems({ pool: db.pool, kafka, appliedTopic: applied, accepted: [] })).toEqual([]);
    expect(outcome).not.toEqual({ published: 1 });
  });
});
