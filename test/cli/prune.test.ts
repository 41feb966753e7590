import { beforeAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../kit/db.ts';
import { fillAnomalies, fillInbox, fillOutbox } from '../kit/fill.ts';
import { runBridge } from '../kit/run-bridge.ts';

describe('bridge prune (as a subprocess)', () => {
  const db = useTestDatabase();
  let env: Record<string, string>;
  const snapshot = async () =>
    (
      await db.pool.query(`SELECT
        (SELECT count(*) FROM inbox_events)::int AS inbox, (SELECT count(payload) FROM inbox_events)::int AS inbox_bodies,
        (SELECT count(*) FROM inbox_anomalies)::int AS anomalies, (SELECT count(payload) FROM inbox_anomalies)::int AS anomaly_bodies,
        (SELECT count(*) FROM applied_outbox)::int AS outbox, (SELECT count(*) FROM applied_outbox_batches)::int AS batches`)
    ).rows[0];

  beforeAll(async () => {
    await fillInbox(db.pool, 3000);
    await fillAnomalies(db.pool, 90);
    await fillOutbox(db.pool);
    // Only what the command is given: the defaults, with small batches.
    env = { DATABASE_URL: db.url, RETENTION_BATCH_ROWS: '200', RETENTION_PAUSE_MS: '0' };
  });

  it('--dry-run --json counts per table what a pass would do now and changes nothing; the pass then does exactly that', async () => {
    const before = await snapshot();
    const dry = await runBridge(['prune', '--dry-run', '--json'], env);
    expect(dry.code, dry.stderr).toBe(0);
    const plan = dry.json();
    expect(plan).toMatchObject({
      dry_run: true,
      settings: { body_days: 30, inbox_days: 180, outbox_days: 7, batch_rows: 200, max_seconds: null },
    });
    const rows = Object.fromEntries(plan.counts.map((c: any) => [`${c.table}.${c.action}`, c.rows]));
    // fillInbox: 80% settled, ages 1 / 60 / 200 days in equal thirds; outbox: see fill.ts.
    const { rows: expected } = await db.pool.query(`SELECT
      count(*) FILTER (WHERE status IN ('applied','stale','duplicate','duplicate_version') AND updated_at < now() - interval '30 days')::int AS bodies,
      count(*) FILTER (WHERE status IN ('applied','stale','duplicate','duplicate_version') AND updated_at < now() - interval '180 days')::int AS deleted
      FROM inbox_events`);
    expect(rows).toEqual({
      'inbox_events.pruned_body': expected[0].bodies,
      'inbox_events.deleted': expected[0].deleted,
      'inbox_anomalies.pruned_body': 40,
      'inbox_anomalies.deleted': 20,
      'applied_outbox.deleted': 5400,
      'applied_outbox_batches.deleted': 10,
    });
    expect(plan.counts.every((c: any) => typeof c.older_than === 'string')).toBe(true);
    expect(await snapshot()).toEqual(before);

    const text = await runBridge(['prune', '--dry-run'], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/inbox_events\s+pruned_body\s+\d+/);
    expect(text.stdout).toMatch(/applied_outbox\s+deleted\s+5400/);
    expect(text.stdout).toContain('(dry run: nothing changed)');

    const run = await runBridge(['prune', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    const done = run.json();
    expect(done).toMatchObject({ dry_run: false, result: 'complete' });
    expect(done.counts.map((c: any) => [c.table, c.action, c.rows])).toEqual(plan.counts.map((c: any) => [c.table, c.action, c.rows]));
    expect(done.batches).toBeGreaterThan(Math.ceil(expected[0].bodies / 200));
    const after = await snapshot();
    expect(after).toEqual({
      inbox: before.inbox - expected[0].deleted,
      inbox_bodies: before.inbox_bodies - expected[0].bodies,
      anomalies: before.anomalies - 20,
      anomaly_bodies: before.anomaly_bodies - 40,
      outbox: before.outbox - 5400,
      batches: before.batches - 10,
    });

    const again = await runBridge(['prune'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^complete: \d+ batches in [\d.]+ s$/m);
    expect(again.stdout).toMatch(/inbox_events\s+pruned_body\s+0\b/);
  });

  it('exits 1 and changes nothing while another process holds the retention lock', async () => {
    await db.pool.query(
      `INSERT INTO inbox_events (tenant_id, event_id, status, body_sha256, payload, updated_at)
       VALUES ('tenant_l', 'evt_locked', 'applied', 'x', 'body', now() - interval '40 days')`,
    );
    const holder = await db.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(7261, 5)');
      const run = await runBridge(['prune'], env);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/another process is pruning/);
    } finally {
      await holder.query('SELECT pg_advisory_unlock(7261, 5)');
      holder.release();
    }
    const { rows } = await db.pool.query(`SELECT payload FROM inbox_events WHERE event_id = 'evt_locked'`);
    expect(rows[0].payload).toBe('body');
  });

  it('invalid retention settings: exit 1 with every problem', async () => {
    const run = await runBridge(['prune', '--dry-run', '--json'], { ...env, RETENTION_BATCH_ROWS: '0', RETENTION_BODY_DAYS: 'soon' });
    expect(run.code).toBe(1);
    const error = JSON.parse(run.stderr);
    expect(error.error).toBe('invalid configuration');
    expect(error.problems.join('\n')).toMatch(
      /RETENTION_BATCH_ROWS[\s\S]*RETENTION_BODY_DAYS|RETENTION_BODY_DAYS[\s\S]*RETENTION_BATCH_ROWS/,
    );
  });
});
