// The relay's database work for one batch (read the next rows, mark them published), without Kafka:
// the store's own relay statements.
import type { Pool } from 'pg';
import { withTransaction } from '#plumbing/db/transaction.ts';
import { RELAY_BATCH_BYTES } from '#services/worker/relay/index.ts';
import { readNextOutbox, recordOutboxBatch, RELAY_LEADER_LOCK_KEY } from '#domain/store/outbox.ts';

export async function relayPassForBenchmark(pool: Pool, batchSize: number): Promise<number> {
  return withTransaction(pool, async (client) => {
    // The benchmark's stand-in for the leader's session lock (the relay holds it on a connection of its own).
    await client.query('SELECT pg_try_advisory_xact_lock($1)', [RELAY_LEADER_LOCK_KEY]);
    const { rows } = await readNextOutbox(client, { limit: batchSize, maxBytes: RELAY_BATCH_BYTES });
    if (rows.length === 0) return 0;
    await recordOutboxBatch(client, { last: rows.at(-1)!, records: rows.length, cluster: null });
    return rows.length;
  });
}
