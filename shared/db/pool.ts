import pg from 'pg';

export interface PoolSettings {
  url: string;
  max?: number;
  statementTimeoutMs?: number;
  applicationName?: string;
}

// Every query has a timeout: a hung query must never hold a Kafka batch past the session timeout.
export function createPool(settings: PoolSettings): pg.Pool {
  return new pg.Pool({
    connectionString: settings.url,
    max: settings.max ?? 10,
    statement_timeout: settings.statementTimeoutMs ?? 10_000,
    query_timeout: (settings.statementTimeoutMs ?? 10_000) + 2_000,
    lock_timeout: Math.min(settings.statementTimeoutMs ?? 10_000, 5_000),
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    application_name: settings.applicationName ?? 'theme-bridge',
  });
}
