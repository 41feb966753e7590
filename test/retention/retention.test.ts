import { beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { eventFingerprint, parseEvent, resourceKey, sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';
import { defaultRetentionSettings, RetentionPruner, type RetentionBatch, type RetentionSettings } from '#domain/retention/index.ts';
import * as retentionSql from '#domain/store/retention.ts';
import { useTestDatabase } from '../kit/db.ts';
import { DAY_S, fillAnomalies, fillInbox, fillOutbox, SETTLED } from '../kit/fill.ts';
import { sleep } from '../kit/eventually.ts';

const BATCH = 500;
const settings: RetentionSettings = { ...defaultRetentionSettings, batchRows: BATCH, pauseMs: 50, maxSeconds: 0 };
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

interface InboxRow {
  tenant_id: string;
  event_id: string;
  status: string;
  payload: string | null;
  fingerprint: string | null;
  updated_at: Date;
}

const ageSeconds = (row: { updated_at: Date }) => (Date.now() - row.updated_at.getTime()) / 1000;

async function inboxRows(pool: pg.Pool): Promise<Map<string, InboxRow>> {
  const { rows } = await pool.query<InboxRow>('SELECT tenant_id, event_id, status, payload, fingerprint, updated_at FROM inbox_events');
  return new Map(rows.map((r) => [`${r.tenant_id}/${r.event_id}`, r]));
}

/** A real event body, stored as the worker stores an applied one. */
function realEvent(k: number): EventEnvelope {
  return sampleThemeEvent({ tenant_id: 'tenant_real', event_id: `evt_real_${k}`, resource: { id: `thm_real_${k}`, version: k } });
}

function record(body: string, key: string, offset: number): SourceRecord {
  return { topic: 'retention.events', partition: 0, offset: String(offset), key, value: Buffer.from(body), timestamp: String(Date.now()) };
}

async function explain(client: pg.PoolClient, text: string, params: unknown[]): Promise<string> {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query(`EXPLAIN (COSTS OFF) ${text}`, params);
    return rows.map((r) => r['QUERY PLAN'] as string).join('\n');
  } finally {
    await client.query('ROLLBACK');
  }
}

describe('retention on a real Postgres (20,000 inbox rows, batches of 500)', () => {
  const db = useTestDatabase();
  const realEvents = Array.from({ length: 200 }, (_, k) => realEvent(k + 1));

  beforeAll(async () => {
    await fillInbox(db.pool, 20_000);
    // Real bodies (the sample theme event), applied 60 days ago: their bodies are pruned, the rows kept.
    const bodies = realEvents.map((e) => JSON.stringify(e));
    await db.pool.query(
      `INSERT INTO inbox_events (tenant_id, event_id, resource_type, resource_id, resource_version, event_type, status, body_sha256, payload, updated_at)
       SELECT 'tenant_real', e, 'theme', r, v, 'theme.updated', 'applied', s, p, now() - interval '60 days'
       FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[]) AS u(e, r, v, s, p)`,
      [
        realEvents.map((e) => e.event_id),
        realEvents.map((e) => e.resource.id),
        realEvents.map((e) => e.resource.version),
        bodies.map(sha256),
        bodies,
      ],
    );
    await fillAnomalies(db.pool, 600);
    await fillOutbox(db.pool);
    await db.pool.query('ANALYZE');
  });

  it('every batch statement walks an index (EXPLAIN)', async () => {
    const client = await db.pool.connect();
    try {
      const day = 86_400_000;
      const body = new Date(Date.now() - 30 * day);
      const old = new Date(Date.now() - 180 * day);
      const outbox = new Date(Date.now() - 7 * day);
      const { rows } = await client.query(retentionSql.SELECT_OUTBOX_BOUND, [outbox]);
      const bound = rows[0] as { tx: string; id: string };
      expect(bound.id).toBe('6000');
      // The big tables, as the planner chooses.
      const plans = {
        bodies: await explain(client, retentionSql.SELECT_INBOX_BODIES, [body, BATCH, 1e7]),
        pruneBodies: await explain(client, retentionSql.PRUNE_INBOX_BODIES, [['tenant_1'], ['evt_ret_1'], [null]]),
        deleteInbox: await explain(client, retentionSql.DELETE_INBOX_ROWS, [old, BATCH]),
        outboxRows: await explain(client, retentionSql.DELETE_OUTBOX_ROWS, ['0', '0', bound.tx, bound.id, BATCH]),
      };
      expect(plans.bodies).toMatch(/Index Scan using inbox_events_retention_body/);
      // The pkey or the search index on event_id (migration 0015): either reaches the rows by index.
      expect(plans.pruneBodies).toMatch(/Index Scan using inbox_events_(pkey|event_id)/);
      expect(plans.deleteInbox).toMatch(/Index Scan using inbox_events_retention_pruned/);
      expect(plans.deleteInbox).toMatch(/Tid Scan on inbox_events/);
      expect(plans.outboxRows).toMatch(/Index (Only )?Scan using applied_outbox_position/);
      expect(plans.outboxRows).toMatch(/Index (Only )?Scan using applied_outbox_key/); // the EXISTS, per row
      expect(plans.outboxRows).toMatch(/Index Scan using applied_outbox_pkey/);
      for (const plan of Object.values(plans)) expect(plan).not.toMatch(/Seq Scan|Hash/);
      // The small tables: an index serves every access (here the planner may rightly prefer a scan of a few pages).
      await client.query('SET enable_seqscan = off');
      const small = [
        await explain(client, retentionSql.PRUNE_ANOMALY_BODIES, [body, BATCH]),
        await explain(client, retentionSql.DELETE_ANOMALY_ROWS, [old, BATCH]),
        await explain(client, retentionSql.SELECT_OUTBOX_BOUND, [outbox]),
        await explain(client, retentionSql.DELETE_OUTBOX_BATCHES, [outbox, BATCH]),
      ];
      for (const plan of small) expect(plan).not.toMatch(/Seq Scan/);
      expect(small[0]).toMatch(/inbox_anomalies_retention_body/);
      expect(small[1]).toMatch(/inbox_anomalies_retention_pruned/);
      expect(small[2]).toMatch(/applied_outbox_batches_published/);
    } finally {
      await client.query('RESET enable_seqscan').catch(() => {});
      client.release();
    }
  });

  it('prunes only what is due, in many batches of at most 500 rows, while applies go on; the dry run predicted it', async () => {
    const before = await inboxRows(db.pool);
    const anomaliesBefore = (await db.pool.query('SELECT id, status, payload, updated_at FROM inbox_anomalies')).rows;
    const outboxBefore = (await db.pool.query<{ id: string; key: string }>('SELECT id::text, key FROM applied_outbox')).rows;
    const newestPerKey = new Map<string, number>();
    for (const r of outboxBefore) newestPerKey.set(r.key, Math.max(newestPerKey.get(r.key) ?? 0, Number(r.id)));

    const plan = await new RetentionPruner({ pool: db.pool, settings }).plan();
    expect(await inboxRows(db.pool)).toEqual(before); // the dry run changed nothing

    const batches: RetentionBatch[] = [];
    const pruner = new RetentionPruner({ pool: db.pool, settings, onBatch: (b) => batches.push(b) });
    const applier = new SnapshotApplier({ pool: db.pool });
    const t0 = performance.now();
    let done = false;
    const running = pruner.run().finally(() => (done = true));
    // Meanwhile: redeliveries of pruned events (other bytes: delivery_attempt 2, other whitespace)
    // and new events, one at a time, each timed.
    const applyMs: number[] = [];
    const outcomes: string[] = [];
    let offset = 0;
    for (let k = 0; !done; k += 1) {
      const redelivery = { ...realEvents[k % realEvents.length]!, delivery_attempt: 2 };
      const fresh = sampleThemeEvent({ tenant_id: 'tenant_live', resource: { id: `thm_live_${k}`, version: 1 } });
      for (const [event, body] of [
        [redelivery, JSON.stringify(redelivery, null, 1)],
        [fresh, JSON.stringify(fresh)],
      ] as const) {
        const a0 = performance.now();
        const result = await applier.apply(record(body, resourceKey(event), offset++));
        applyMs.push(performance.now() - a0);
        outcomes.push(`${event.tenant_id}:${result.outcome}`);
      }
      await sleep(20);
    }
    const report = await running;
    const runMs = performance.now() - t0;

    expect(report.result).toBe('complete');
    expect(report.counts).toEqual(plan.counts.map((c) => ({ ...c, olderThan: expect.any(String) })));
    expect(report.batches).toBe(batches.length);
    for (const b of batches) {
      expect(b.rows).toBeLessThanOrEqual(BATCH);
      expect(b.scanned).toBeLessThanOrEqual(BATCH);
    }
    const by = (table: string, action: string) => batches.filter((b) => b.table === table && b.action === action);
    const bodyBatches = by('inbox_events', 'pruned_body');
    const rowsOf = (bs: RetentionBatch[]) => bs.reduce((n, b) => n + b.rows, 0);
    expect(bodyBatches.length).toBeGreaterThanOrEqual(Math.ceil(rowsOf(bodyBatches) / BATCH));
    expect(bodyBatches.length).toBeGreaterThan(20);
    expect(by('inbox_events', 'deleted').length).toBeGreaterThan(10);
    expect(by('applied_outbox', 'deleted').length).toBeGreaterThanOrEqual(12);

    // Applies during the run: many (none waits for the whole run), each with the right outcome. How
    // long each took is printed below, not judged: that is the machine's speed.
    expect(applyMs.length).toBeGreaterThanOrEqual(20);
    expect(new Set(outcomes)).toEqual(new Set(['tenant_real:duplicate', 'tenant_live:applied']));

    const ms = batches.map((b) => b.ms).sort((a, b) => a - b);
    console.log(
      `[retention] ${report.batches} batches in ${(runMs / 1000).toFixed(2)} s (pause ${settings.pauseMs} ms); ` +
        `rows ${report.counts.map((c) => `${c.table}.${c.action}=${c.rows}`).join(' ')}; ` +
        `batch ms median ${ms[Math.floor(ms.length / 2)]!.toFixed(1)} max ${ms.at(-1)!.toFixed(1)}; ` +
        `${applyMs.length} applies during the run, max ${Math.max(...applyMs).toFixed(1)} ms, median ${[...applyMs].sort((a, b) => a - b)[Math.floor(applyMs.length / 2)]!.toFixed(1)} ms`,
    );

    // inbox_events: exactly the due rows changed; pruned ones keep the fingerprint of their body.
    const after = await inboxRows(db.pool);
    let pruned = 0;
    let deleted = 0;
    for (const [key, row] of before) {
      const settled = SETTLED.includes(row.status);
      const now = after.get(key);
      if (settled && ageSeconds(row) > 180 * DAY_S) {
        expect(now, key).toBeUndefined();
        deleted += 1;
      } else if (settled && ageSeconds(row) > 30 * DAY_S) {
        expect(now, key).toBeDefined();
        expect(now!.payload).toBeNull();
        const parsed = parseEvent(Buffer.from(row.payload!, 'utf8'));
        expect(now!.fingerprint, key).toBe(parsed.ok ? eventFingerprint(parsed.envelope) : null);
        expect(now!.status).toBe(row.status);
        expect(now!.updated_at).toEqual(row.updated_at);
        pruned += 1;
      } else {
        // Recent, pending (received / retrying / dead_lettered) or quarantined: untouched.
        expect(now, key).toEqual(row);
      }
    }
    expect(report.counts.find((c) => c.table === 'inbox_events' && c.action === 'deleted')!.rows).toBe(deleted);
    // Pruned in this run: the 60-day rows and the 200-day ones (pruned, then deleted).
    expect(report.counts.find((c) => c.table === 'inbox_events' && c.action === 'pruned_body')!.rows).toBe(pruned + deleted);
    const pending = [...after.values()].filter((r) => !SETTLED.includes(r.status));
    expect(pending.length).toBe([...before.values()].filter((r) => !SETTLED.includes(r.status)).length);
    expect(pending.every((r) => r.payload !== null)).toBe(true);
    const real = [...after.values()].filter((r) => r.tenant_id === 'tenant_real');
    expect(real).toHaveLength(200);
    expect(real.every((r) => r.payload === null && r.fingerprint !== null)).toBe(true);
    // Unparseable bodies (every 13th) keep no fingerprint.
    expect(after.get('tenant_1/evt_ret_3913')).toMatchObject({ status: 'applied', payload: null, fingerprint: null });

    // inbox_anomalies: settled ones lose their body after 30 days and go after 180; quarantined stay.
    const anomaliesAfter = new Map((await db.pool.query('SELECT id, status, payload FROM inbox_anomalies')).rows.map((r) => [r.id, r]));
    for (const a of anomaliesBefore) {
      const settled = a.status !== 'quarantined';
      const now = anomaliesAfter.get(a.id);
      if (settled && ageSeconds(a) > 180 * DAY_S) expect(now).toBeUndefined();
      else if (settled && ageSeconds(a) > 30 * DAY_S) expect(now.payload).toBeNull();
      else expect(now.payload).toBe(a.payload);
    }

    // applied_outbox: published before the bound (id <= 6000) and superseded: gone; the newest per
    // key, everything published since (6001..8000) and everything unpublished (8001..10000): kept.
    const outboxAfter = new Set((await db.pool.query<{ id: string }>('SELECT id::text FROM applied_outbox')).rows.map((r) => Number(r.id)));
    for (const r of outboxBefore) {
      const id = Number(r.id);
      const keep = id > 6000 || newestPerKey.get(r.key) === id;
      expect(outboxAfter.has(id), `outbox ${id}`).toBe(keep);
    }
    for (const newest of newestPerKey.values()) expect(outboxAfter.has(newest)).toBe(true);
    // (Rows above 10000 are the applies made during the run: unpublished as well.)
    const { rows: unpublished } = await db.pool.query('SELECT count(*)::int AS n FROM applied_outbox WHERE id > 8000 AND id <= 10000');
    expect(unpublished[0].n).toBe(2000);
    // Relay batches older than 7 days go; the one of 2 days ago and the cursor stay.
    const { rows: batchRows } = await db.pool.query('SELECT last_id::int FROM applied_outbox_batches ORDER BY id');
    expect(batchRows.map((b) => b.last_id)).toEqual([7000, 8000]);

    // After the run a redelivery with other bytes is still a duplicate: the stored fingerprint decides.
    const again = { ...realEvents[0]!, delivery_attempt: 3 };
    expect((await applier.apply(record(JSON.stringify(again, null, 2), resourceKey(again), offset++))).outcome).toBe('duplicate');
  });

  it('a second run finds nothing; once the cursor itself is old, all published rows but the newest per key go, never an unpublished one or the cursor', async () => {
    const second = await new RetentionPruner({ pool: db.pool, settings }).run();
    expect(second.result).toBe('complete');
    expect(second.counts.every((c) => c.rows === 0)).toBe(true);

    await db.pool.query(`UPDATE applied_outbox_batches SET published_at = now() - interval '100 days'`);
    const plan = await new RetentionPruner({ pool: db.pool, settings }).plan();
    const batches: RetentionBatch[] = [];
    const report = await new RetentionPruner({ pool: db.pool, settings, onBatch: (b) => batches.push(b) }).run();
    expect(report.result).toBe('complete');
    expect(report.counts).toEqual(plan.counts.map((c) => ({ ...c, olderThan: expect.any(String) })));
    const outbox = report.counts.find((c) => c.table === 'applied_outbox')!;
    // 6001..8000: 2000 rows, 200 of them with a key of their own (kept), 1800 superseded by rows after 9000.
    expect(outbox.rows).toBe(1800);
    const { rows } = await db.pool.query<{ id: string; key: string }>('SELECT id::text, key FROM applied_outbox ORDER BY id');
    const ids = rows.map((r) => Number(r.id));
    expect(ids.filter((id) => id > 8000 && id <= 10000)).toHaveLength(2000);
    expect(ids.filter((id) => id > 10000).length).toBeGreaterThanOrEqual(20); // applied during the first run, unpublished
    expect(ids.filter((id) => id <= 8000).every((id) => id % 10 === 0)).toBe(true);
    const { rows: left } = await db.pool.query('SELECT last_id::int FROM applied_outbox_batches');
    expect(left.map((b) => b.last_id)).toEqual([8000]);
  });

  it('a run cut short goes on with the outbox walk where it stopped; a walk that reached its bound starts over', async () => {
    // Left at or before the (old) cursor: 800 rows, each the newest of its key: walked, kept.
    let seen: RetentionBatch[] = [];
    const abort = new AbortController();
    const outboxWalk = () => seen.filter((b) => b.table === 'applied_outbox');
    const onBatch = (b: RetentionBatch) => {
      seen.push(b);
      if (outboxWalk().length === 3) abort.abort(); // e.g. the worker shutting down
    };
    const pruner = new RetentionPruner({ pool: db.pool, settings: { ...settings, batchRows: 100 }, onBatch });
    expect((await pruner.run({ signal: abort.signal })).result).toBe('stopped');
    const walked = outboxWalk().reduce((n, b) => n + b.scanned, 0);
    expect(walked).toBe(300);
    seen = [];
    expect((await pruner.run()).result).toBe('complete');
    expect(outboxWalk().reduce((n, b) => n + b.scanned, 0)).toBe(800 - walked);
    seen = [];
    expect((await pruner.run()).result).toBe('complete');
    expect(outboxWalk().reduce((n, b) => n + b.scanned, 0)).toBe(800);
    expect(outboxWalk().every((b) => b.rows === 0)).toBe(true);
  });

  it('only one run at a time: while another session holds the retention lock a run is skipped', async () => {
    const holder = await db.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(7261, 5)');
      const report = await new RetentionPruner({ pool: db.pool, settings }).run();
      expect(report.result).toBe('skipped');
      expect(report.batches).toBe(0);
    } finally {
      await holder.query('SELECT pg_advisory_unlock(7261, 5)');
      holder.release();
    }
    expect((await new RetentionPruner({ pool: db.pool, settings }).run()).result).toBe('complete');
  });

  it('a body batch reads at most RETENTION_BATCH_BYTES of bodies (and always at least one)', async () => {
    await db.pool.query(
      `INSERT INTO inbox_events (tenant_id, event_id, status, body_sha256, payload, updated_at)
       SELECT 'tenant_big', 'evt_big_' || i, 'applied', md5(i::text), repeat(md5(i::text), 128), now() - interval '40 days'
       FROM generate_series(1, 40) AS i`,
    );
    const batches: RetentionBatch[] = [];
    const report = await new RetentionPruner({
      pool: db.pool,
      settings: { ...settings, batchBytes: 10_000 },
      onBatch: (b) => batches.push(b),
    }).run();
    expect(report.result).toBe('complete');
    const bodies = batches.filter((b) => b.action === 'pruned_body' && b.table === 'inbox_events' && b.rows > 0);
    // 4096-byte bodies: a batch takes rows while the bytes before them are under 10,000, i.e. 3.
    expect(bodies.map((b) => b.rows)).toEqual([...Array(13).fill(3), 1]);
  });

  it('stops at maxSeconds with the result time_limit', async () => {
    await db.pool.query(
      `INSERT INTO inbox_events (tenant_id, event_id, status, body_sha256, payload, updated_at)
       SELECT 'tenant_t', 'evt_t_' || i, 'stale', md5(i::text), 'x', now() - interval '40 days' FROM generate_series(1, 3000) AS i`,
    );
    const report = await new RetentionPruner({ pool: db.pool, settings: { ...settings, batchRows: 100, pauseMs: 20 } }).run({
      maxSeconds: 0.3,
    });
    expect(report.result).toBe('time_limit');
    const done = report.counts.find((c) => c.table === 'inbox_events' && c.action === 'pruned_body')!.rows;
    expect(done).toBeGreaterThan(0);
    expect(done).toBeLessThan(3000);
  });
});
