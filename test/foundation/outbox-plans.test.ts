import { beforeAll, describe, expect, it } from 'vitest';
import { OLDEST_UNPUBLISHED_OUTBOX_AGE, OUTBOX_HAS_PENDING, outboxHasPending, oldestUnpublishedOutboxAge } from '#domain/store/outbox.ts';
import { useTestDatabase } from '../kit/db.ts';

const ROWS = 30_000;

/**
 * Regression: in a soak at a steady rate Postgres's CPU and the POST -> applied p99 rose as the
 * outbox grew. The relay asks, after every pass that
 * found nothing readable, whether rows wait after its cursor; `EXISTS (... WHERE (tx, id) > cursor)`
 * was planned as a sequential scan of the whole outbox (the planner expects a third of the rows to
 * match and the first one to come at once; with the relay caught up none does), slower with every
 * row. The worker's outbox-age gauge walked the whole position index the same way.
 * Both must stay index probes whatever the outbox holds.
 */
describe('outbox queries the relay and the metrics run all the time', () => {
  const db = useTestDatabase();
  let last: { tx: string; id: string };

  beforeAll(async () => {
    await db.pool.query(
      `INSERT INTO applied_outbox (event_id, key, payload, source_topic, source_partition, source_offset)
       SELECT 'evt_' || n, 'acme/theme/thm_' || n, repeat('x', 600), 'events', 0, n FROM generate_series(1, $1) AS n`,
      [ROWS],
    );
    // No ANALYZE: a fast-growing outbox is planned without statistics until autovacuum gets to it
    // (the soak's database had none after 6 minutes and 180,000 rows). The last test analyzes.
    const { rows } = await db.pool.query<{ tx: string; id: string }>(
      'SELECT tx::text AS tx, id::text AS id FROM applied_outbox ORDER BY applied_outbox.tx DESC, applied_outbox.id DESC LIMIT 1',
    );
    last = rows[0]!;
    // The relay has published everything: its cursor is the last row.
    await db.pool.query('INSERT INTO applied_outbox_batches (last_tx, last_id, records) VALUES ($1::xid8, $2::bigint, $3)', [
      last.tx,
      last.id,
      ROWS,
    ]);
  }, 60_000);

  /** Every node of the plan, flattened, with the rows each one read. */
  async function plan(text: string, values: unknown[]): Promise<Array<{ type: string; relation?: string; rows: number }>> {
    const { rows } = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>({
      text: `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
      values,
    });
    type PlanNode = {
      'Node Type': string;
      'Relation Name'?: string;
      'Actual Rows': number;
      'Rows Removed by Filter'?: number;
      Plans?: PlanNode[];
    };
    const nodes: Array<{ type: string; relation?: string; rows: number }> = [];
    const walk = (n: PlanNode) => {
      nodes.push({ type: n['Node Type'], relation: n['Relation Name'], rows: n['Actual Rows'] + (n['Rows Removed by Filter'] ?? 0) });
      for (const c of n.Plans ?? []) walk(c);
    };
    walk(rows[0]!['QUERY PLAN'][0]!.Plan);
    return nodes;
  }

  it('"anything after the cursor?" probes the position index and reads no row when nothing waits', async () => {
    expect(await outboxHasPending(db.pool, last)).toBe(false);
    expect(await outboxHasPending(db.pool, { tx: last.tx, id: String(Number(last.id) - 1) })).toBe(true);
    const nodes = (await plan(OUTBOX_HAS_PENDING, [last.tx, last.id])).filter((n) => n.relation === 'applied_outbox');
    expect(nodes.map((n) => n.type)).toEqual(['Index Only Scan']);
    expect(nodes[0]!.rows).toBe(0);
  });

  it('the age of the oldest unpublished row probes the index from the cursor on', async () => {
    expect(await oldestUnpublishedOutboxAge(db.pool)).toBe(0);
    const nodes = (await plan(OLDEST_UNPUBLISHED_OUTBOX_AGE, [])).filter((n) => n.relation === 'applied_outbox');
    expect(nodes.map((n) => n.type)).toEqual(['Index Scan']);
    expect(nodes[0]!.rows).toBe(0);
  });

  it('both stay index probes once the outbox has statistics', async () => {
    await db.pool.query('ANALYZE applied_outbox');
    for (const [text, values] of [
      [OUTBOX_HAS_PENDING, [last.tx, last.id]],
      [OLDEST_UNPUBLISHED_OUTBOX_AGE, []],
    ] as const) {
      const nodes = (await plan(text, [...values])).filter((n) => n.relation === 'applied_outbox');
      expect(nodes.map((n) => n.type.replace('Index Only Scan', 'Index Scan'))).toEqual(['Index Scan']);
      expect(nodes[0]!.rows).toBe(0);
    }
  });
});
