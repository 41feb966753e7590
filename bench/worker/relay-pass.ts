// The relay's database work for one batch (read the next rows, mark them published), without Kafka.
import type { Pool } from 'pg';
import { applySql } from '#domain/apply/index.ts';
import { withTransaction } from '#plumbing/db/transaction.ts';

export async function relayPassForBenchmark(pool: Pool, batchSize: number): Promise<number> {
  return withTransaction(pool, async (client) => {
    await client.query('SELECT pg_try_advisory_xact_lock($1)', [applySql.RELAY_LEADER_LOCK_KEY]);
    const position = (await client.query<{ tx: string; id: string }>(applySql.SELECT_RELAY_POSITION)).rows[0]!;
    const { rows } = await client.query<{ id: string; tx: string }>(applySql.SELECT_NEXT_OUTBOX, [position.tx, position.id, batchSize]);
    if (rows.length === 0) return 0;
    await client.query(applySql.RECORD_OUTBOX_BATCH, [rows.at(-1)!.tx, rows.at(-1)!.id, rows.length, null]);
    return rows.length;
  });
}
