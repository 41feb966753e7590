// Defaults more than one program needs, in one place. A service's own tuning defaults (batch
// sizes, timeouts) stay in its config.ts, next to the variable they belong to.
const DEV_DATABASE = 'bridge';

export const DEFAULTS = {
  topics: {
    events: 'theme.events',
    applied: 'theme.applied',
    eventsPartitions: 12,
    retryLevels: 4,
    replicationFactor: 1,
    minInsyncReplicas: 1,
  },
  /** The worker's consumer group; the CLI's lag, offsets and reprocess commands default to it. */
  consumerGroup: 'theme-applier',
  database: {
    poolSize: 10,
    statementTimeoutMs: 10_000,
    /** The server ends a session left idle inside a transaction this long (a frozen process's locks). */
    idleInTransactionTimeoutMs: 30_000,
  },
  /** Metrics and health: each program its own, as they run side by side on one machine. */
  adminPort: { ingress: 9464, worker: 9465, relay: 9466 },
  /** The operator console's web port (services/console). */
  consolePort: 9470,
  /**
   * Where `npm start` runs the broker and the database, and the database it creates there; the
   * development commands' defaults (dev-defaults.ts), never a deployed program's.
   */
  dev: {
    kafkaBrokers: '127.0.0.1:9092',
    database: DEV_DATABASE,
    databaseUrl: `postgres://postgres@127.0.0.1:5432/${DEV_DATABASE}`,
  },
} as const;
