import { describe, expect, it } from 'vitest';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { useTestDatabase } from '../kit/db.ts';
import { raw, themeEvent } from '../kit/worker.ts';

// The apply path's big statements are prepared once per connection: planning them again for every
// transaction was most of a one-event transaction's Postgres CPU (`bench/worker/pg-cpu.ts 300 1`),
// which is what a worker at a few events a second pays per event. Once Postgres settles on a generic plan
// from small chunks, a full chunk must still come out right through it.
describe('prepared apply statements', () => {
  const db = useTestDatabase();

  const record = (offset: number, id: string, version: number): SourceRecord => {
    const event = raw(themeEvent('tenant_prep', id, version));
    return { topic: 'prep', partition: 0, offset: String(offset), key: event.key, value: Buffer.from(event.value), headers: {} };
  };

  it('are prepared once per session, and a large chunk after many one-event chunks still applies exactly', async () => {
    const pool = createPool({ url: db.url, max: 1, applicationName: 'prepared-apply-test' });
    try {
      const applier = new SnapshotApplier({ pool });
      let offset = 0;
      // Twelve one-event transactions: past the five custom plans after which Postgres may switch to a generic plan.
      for (let i = 0; i < 12; i += 1) {
        const [result] = await applier.applyBatch([record(offset++, `thm_single_${i}`, 1)]);
        expect(result!.outcome).toBe('applied');
      }
      // 300 events: 150 new resources at version 2, 100 of the singles moved to version 2 (only 12 exist:
      // 88 of them are new too), then 50 stale and duplicate versions of the same chunk's keys.
      const chunk: SourceRecord[] = [];
      for (let i = 0; i < 150; i += 1) chunk.push(record(offset++, `thm_bulk_${i}`, 2));
      for (let i = 0; i < 100; i += 1) chunk.push(record(offset++, `thm_single_${i}`, 2));
      for (let i = 0; i < 25; i += 1) chunk.push(record(offset++, `thm_bulk_${i}`, 1));
      for (let i = 0; i < 25; i += 1) chunk.push(record(offset++, `thm_bulk_${i + 25}`, 2));
      const outcomes: Record<string, number> = {};
      for (const r of await applier.applyBatch(chunk)) outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
      expect(outcomes).toEqual({ applied: 250, stale: 25, duplicate_version: 25 });

      const client = await pool.connect();
      try {
        const { rows: prepared } = await client.query<{ name: string; executions: number }>(
          `SELECT name, (generic_plans + custom_plans)::int AS executions FROM pg_prepared_statements ORDER BY name`,
        );
        expect(prepared).toEqual([
          { name: 'apply-read-context', executions: 13 },
          { name: 'apply-write-effects', executions: 13 },
        ]);
        const { rows: state } = await client.query<{ n: number; v2: number }>(
          `SELECT count(*)::int AS n, count(*) FILTER (WHERE version = 2)::int AS v2 FROM resource_state WHERE tenant_id = 'tenant_prep'`,
        );
        expect(state[0]).toEqual({ n: 250, v2: 250 });
        const { rows: outbox } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM applied_outbox`);
        expect(outbox[0]!.n).toBe(12 + 250);
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
    }
  });
});
