import pg from 'pg';
import type { Logger } from '#plumbing/logging/logger.ts';

export interface PoolSettings {
  url: string;
  max?: number;
  statementTimeoutMs?: number;
  applicationName?: string;
  /**
   * The server ends a session idle inside a transaction this long (default 30 s). A frozen or
   * partitioned process would otherwise keep its advisory locks and the relay's snapshot horizon
   * for hours; every transaction of the bridge is busy from BEGIN to COMMIT, never idle that long.
   */
  idleInTransactionTimeoutMs?: number;
  /**
   * false: the session's commits return before their WAL reaches disk (synchronous_commit=off).
   * Only for writes that may be lost in a Postgres crash without harm: the relay's cursor, whose
   * loss republishes identical records. A crash loses only the newest such commits, never an
   * older one while a later synchronous commit survives (the WAL is flushed in order).
   */
  synchronousCommit?: boolean;
  logger?: Logger;
}

export const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000;

// Every query has a timeout: a hung query must never hold a Kafka batch past the session timeout,
// and every session a bound on how long it may sit in an open transaction.
export function createPool(settings: PoolSettings): pg.Pool {
  const pool = new pg.Pool({
    connectionString: settings.url,
    max: settings.max ?? 10,
    statement_timeout: settings.statementTimeoutMs ?? 10_000,
    query_timeout: (settings.statementTimeoutMs ?? 10_000) + 2_000,
    lock_timeout: Math.min(settings.statementTimeoutMs ?? 10_000, 5_000),
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    application_name: settings.applicationName ?? 'theme-bridge',
    idle_in_transaction_session_timeout: settings.idleInTransactionTimeoutMs ?? DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    ...(settings.synchronousCommit === false ? { options: '-c synchronous_commit=off' } : {}),
    // A peer that vanished (host down, network cut) is noticed by the kernel instead of never.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  // A Postgres restart makes every open connection emit 'error': pg-pool re-emits it for idle ones,
  // and a checked-out client emits it itself. Unhandled, either kills the process; the failing
  // query already reports the same error to its caller, which decides (e.g. pause for an outage).
  pool.on('error', (error) => settings.logger?.warn({ err: error }, 'idle database connection failed'));
  pool.on('connect', (client) => client.on('error', (error) => settings.logger?.debug({ err: error }, 'database connection failed')));
  return pool;
}
