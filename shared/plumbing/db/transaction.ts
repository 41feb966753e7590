import type { Pool, PoolClient } from 'pg';

/**
 * node-postgres's query_timeout: the server never answered. A ROLLBACK on that connection would
 * queue behind the unanswered query and wait out a whole timeout again (on a link that is gone,
 * for nothing); discarding the connection ends the transaction just as well.
 */
export function isClientReadTimeout(error: unknown): boolean {
  return error instanceof Error && error.message === 'Query read timeout';
}

/**
 * Runs fn inside one transaction on a pooled connection: COMMIT when it returns, ROLLBACK when it
 * throws. A connection that saw an error is discarded rather than reused in an unknown state.
 */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  const client = await pool.connect();
  let failed: unknown;
  try {
    await client.query(begin);
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    failed = error;
    if (!isClientReadTimeout(error)) await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release(failed instanceof Error ? failed : undefined);
  }
}
