import { describe, expect, it } from 'vitest';
import { switchOrdering } from '#domain/operations/ordering-switch.ts';
import { writeChunkEffects, type StateChunkRow } from '#domain/store/chunk.ts';
import { useTestDatabase } from '../kit/db.ts';

// Defence in depth below the decision: the chunk statement itself never writes a resource across
// orderings, and the switch never interleaves with an apply's write.
describe('resource ordering in the store (real Postgres)', () => {
  const db = useTestDatabase();

  const row = async (tenant: string, id: string) =>
    (
      await db.pool.query<{ version: string | null; ordered_by: string; last_event_id: string; last_occurred_at: Date | null }>(
        'SELECT version, ordered_by, last_event_id, last_occurred_at FROM resource_state WHERE tenant_id = $1 AND resource_id = $2',
        [tenant, id],
      )
    ).rows[0];

  const stateRow = (tenant: string, id: string, over: Partial<StateChunkRow>): StateChunkRow => ({
    tenant_id: tenant,
    resource_type: 'theme',
    resource_id: id,
    version: null,
    deleted: false,
    last_event_id: 'evt_new',
    source_partition: 0,
    data: '{}',
    last_occurred_at: null,
    ordered_by: 'version',
    ...over,
  });

  const write = (state: StateChunkRow) => writeChunkEffects(db.pool, { inbox: [], state: [state], outbox: [], anomalies: [] });

  it('refuses a write of the other ordering, whatever its key; takes one of its own ordering', async () => {
    const tenant = 'tenant_guard';
    await db.pool.query(
      `INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, last_event_id, last_occurred_at, ordered_by)
       VALUES ($1, 'theme', 'by_time', NULL, 'evt_time', '2026-06-16T10:00:00Z', 'occurred_at'),
              ($1, 'theme', 'by_version', 3, 'evt_v3', NULL, 'version')`,
      [tenant],
    );
    // A version far above, onto a time-ordered row without one: refused (it used to clear the time).
    expect((await write(stateRow(tenant, 'by_time', { version: 99 }))).state_rows).toBe(0);
    expect(await row(tenant, 'by_time')).toMatchObject({ ordered_by: 'occurred_at', last_event_id: 'evt_time', version: null });
    // A later time onto a version-ordered row: refused.
    const later = stateRow(tenant, 'by_version', { ordered_by: 'occurred_at', last_occurred_at: '2030-01-01T00:00:00.000000Z' });
    expect((await write(later)).state_rows).toBe(0);
    expect(await row(tenant, 'by_version')).toMatchObject({ ordered_by: 'version', version: '3', last_occurred_at: null });
    // Each ordering's own writes still go through its guard.
    expect((await write(stateRow(tenant, 'by_version', { version: 4 }))).state_rows).toBe(1);
    expect((await write(stateRow(tenant, 'by_version', { version: 2 }))).state_rows).toBe(0);
    const newer = stateRow(tenant, 'by_time', { ordered_by: 'occurred_at', last_occurred_at: '2026-06-16T10:00:01.000000Z' });
    expect((await write(newer)).state_rows).toBe(1);
  });

  it('the switch waits for an apply transaction in flight and, past its lock timeout, changes nothing', async () => {
    const tenant = 'tenant_switch_wait';
    await db.pool.query(
      `INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, last_event_id) VALUES ($1, 'theme', 'thm_a', 1, 'evt_a')`,
      [tenant],
    );
    const applier = await db.pool.connect();
    try {
      // An apply that has written and not yet committed holds the table's ROW EXCLUSIVE lock.
      await applier.query('BEGIN');
      await applier.query(`UPDATE resource_state SET version = 2, last_event_id = 'evt_b' WHERE tenant_id = $1`, [tenant]);
      await expect(
        switchOrdering(db.pool, { type: 'theme', tenant, to: 'occurred_at', dryRun: false, lockTimeoutMs: 200 }),
      ).rejects.toThrow(/lock timeout/);
      await applier.query('COMMIT');
    } finally {
      applier.release();
    }
    expect(await row(tenant, 'thm_a')).toMatchObject({ ordered_by: 'version', version: '2' });
    // Once it has committed, the switch runs, seeding no time (no inbox row here: counted).
    const report = await switchOrdering(db.pool, { type: 'theme', tenant, to: 'occurred_at', dryRun: false });
    expect(report).toMatchObject({ rows: 1, withoutKey: 1, from: 'version', to: 'occurred_at' });
    expect(await row(tenant, 'thm_a')).toMatchObject({ ordered_by: 'occurred_at', version: '2', last_occurred_at: null });
  });
});
