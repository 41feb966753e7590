// Statements about the connection itself, not a table: health probes, transaction ends, session limits.
import type { QueryConfig, QueryResult, QueryResultRow } from 'pg';

/** A pool, a pooled client or a plain client: every store function takes one. */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(config: QueryConfig): Promise<QueryResult<R>>;
}

/** A cheap round trip (health probes, the relay leader's heartbeat). */
export async function ping(client: Queryable): Promise<void> {
  await client.query({ text: 'SELECT 1' });
}

export async function commit(client: Queryable): Promise<void> {
  await client.query({ text: 'COMMIT' });
}

export async function rollback(client: Queryable): Promise<void> {
  await client.query({ text: 'ROLLBACK' });
}

/** The server ends this session after `ms` without a statement (Postgres >= 14; older servers refuse the setting). */
export async function limitIdleSession(client: Queryable, ms: number): Promise<void> {
  await client.query({ text: `SET idle_session_timeout = ${Math.round(ms)}` });
}
