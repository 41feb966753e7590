import { z } from 'zod';
import { databaseEnv, kafkaEnv, logEnv, portSchema, positiveIntSchema, topicEnv } from '#plumbing/config/env.ts';
import { failureSettingsFrom, failuresEnv, type FailureSettings } from '#domain/failures/index.ts';
import { retentionEnv, retentionSettingsFrom, type RetentionSettings } from '#domain/retention/index.ts';
import { adminHostEnv } from '#plumbing/observability/admin-server.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { loadReconcileSources, type ReconcileSource } from '#domain/sources/index.ts';
import { CRASH_POINTS, type CrashPoint } from './crash-points.ts';
import { RELAY_BATCH_BYTES, STOP_DRAIN_MS } from './relay/index.ts';

export const DEFAULT_APPLY_TRANSACTIONS = 3;
export const WORKER_ROLES = ['all', 'apply', 'relay'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];
export const DEFAULT_OFFSET_COMMIT_INTERVAL_MS = 100;
/**
 * The whole stop, SIGTERM to exit: inside Kubernetes' default grace period (30 s) with room to
 * spare, and above the relay's drain (RELAY_STOP_DRAIN_MS) with the chunk in flight.
 */
export const DEFAULT_STOP_TIMEOUT_MS = 25_000;

export const workerEnvSchema = z.object({
  ...kafkaEnv.shape,
  ...databaseEnv.shape,
  ...logEnv.shape,
  TOPIC_EVENTS: topicEnv.shape.TOPIC_EVENTS,
  TOPIC_APPLIED: topicEnv.shape.TOPIC_APPLIED,
  TOPIC_RETRY_LEVELS: topicEnv.shape.TOPIC_RETRY_LEVELS,
  ...failuresEnv.shape,
  ...retentionEnv.shape,
  // Not the ingress's port: the worker runs beside it on one machine.
  // Default by role (workerConfigFromEnv): a relay process beside a worker on one machine needs its own.
  ADMIN_PORT: portSchema.optional(),
  ...adminHostEnv.shape,
  CONSUMER_GROUP: z.string().min(1).default(DEFAULTS.consumerGroup),
  // 1000 records per transaction (npm run bench:worker). Fetches of 1 MiB per partition rather than
  // 2: with every partition of a fetch in flight at once (WORKER_PARTITIONS_CONCURRENCY) they bound
  // what a backlog holds in memory.
  WORKER_BATCH_SIZE: positiveIntSchema.default(1000),
  WORKER_PARTITIONS_CONCURRENCY: positiveIntSchema.default(12),
  // Three apply transactions in flight let node prepare one chunk while Postgres runs the others;
  // with one, node and Postgres take turns (bench:worker measures it against its same-SQL ceiling).
  WORKER_APPLY_TRANSACTIONS: positiveIntSchema.default(DEFAULT_APPLY_TRANSACTIONS),
  WORKER_SESSION_TIMEOUT_MS: positiveIntSchema.default(30_000),
  // Offset commits at most this often (0: after every chunk, one in flight at a time); see
  // coalescedCommits in apply/batch-handler.ts.
  WORKER_OFFSET_COMMIT_INTERVAL_MS: z.coerce.number().int().min(0).default(DEFAULT_OFFSET_COMMIT_INTERVAL_MS),
  WORKER_MAX_BYTES_PER_PARTITION: positiveIntSchema.default(1_048_576),
  // What this process runs: `all` (apply and relay), `apply` (no relay; each commit NOTIFYs the relay
  // processes) or `relay` (the outbox relay alone, LISTENing). See docs/operations.md.
  WORKER_ROLE: z.enum(WORKER_ROLES).default('all'),
  RELAY_BATCH_SIZE: positiveIntSchema.default(500),
  // Removed: the relay runs on the worker's main thread only. Refused rather than ignored, so a
  // deployment that still sets it learns so at start-up.
  WORKER_RELAY: z.undefined({ error: "WORKER_RELAY was removed: the relay always runs on the worker's main thread; unset it" }).optional(),
  // Record bytes per partition in one relay batch beyond its first record (headers included):
  // within the broker's message.max.bytes.
  RELAY_BATCH_BYTES: positiveIntSchema.default(RELAY_BATCH_BYTES),
  RELAY_POLL_MS: positiveIntSchema.default(100),
  RELAY_SEND_TIMEOUT_MS: positiveIntSchema.default(30_000),
  // How long a stopping worker's relay goes on publishing what was applied before the stop (0: not
  // at all; the next leader publishes it). Keep it, plus RELAY_SEND_TIMEOUT_MS, inside the
  // orchestrator's grace period (Kubernetes' terminationGracePeriodSeconds, 30 s by default).
  RELAY_STOP_DRAIN_MS: z.coerce.number().int().min(0).default(STOP_DRAIN_MS),
  // The bound on the whole stop. A step still running at it (a consumer waiting in a rebalance for
  // a frozen member, a broker that does not answer) is left, and the process exits: what was not
  // committed is redelivered, what was not published the next relay leader publishes.
  WORKER_STOP_TIMEOUT_MS: positiveIntSchema.default(DEFAULT_STOP_TIMEOUT_MS),
  // Every worker of one bridge shares it (default <TOPIC_APPLIED>.relay): a new leader fences the old.
  RELAY_TRANSACTIONAL_ID: z.string().min(1).optional(),
  // Test-only fault injection: SIGKILL the process at a named point (see crash-points.ts). Off unless set.
  WORKER_CRASH_AT: z.enum(CRASH_POINTS).optional(),
  WORKER_CRASH_AFTER: positiveIntSchema.default(1),
  // Where the sources come from: `file` (WEBHOOK_SOURCES_FILE, read once at start) or `postgres`
  // (the sources tables, followed while the worker runs; WEBHOOK_SOURCES_FILE is then not read).
  SOURCES_FROM: z.enum(['file', 'postgres']).default('file'),
  // Optional for the worker: only the sources' `reconcile` blocks are read (and only their API
  // credentials resolved), so the worker never needs a webhook signing secret.
  WEBHOOK_SOURCES_FILE: z.string().min(1).optional(),
  RECONCILE_CONCURRENCY: positiveIntSchema.default(2),
  RECONCILE_QUEUE_LIMIT: positiveIntSchema.default(1000),
});

export type WorkerEnv = z.infer<typeof workerEnvSchema>;

export interface WorkerConfig {
  brokers: string[];
  clientId: string;
  databaseUrl: string;
  databasePoolSize: number;
  statementTimeoutMs: number;
  /** See shared/plumbing/db/pool.ts; default 30 s. */
  idleInTransactionTimeoutMs?: number;
  logLevel: string;
  /** What this process runs (WORKER_ROLE); default 'all'. */
  role?: WorkerRole;
  /** LOG_BUFFER_BYTES (stdoutDestination). */
  logBufferBytes?: number;
  eventsTopic: string;
  appliedTopic: string;
  adminPort: number;
  /** Default 127.0.0.1 (a container deployment sets 0.0.0.0 for its probes). */
  adminHost?: string;
  groupId: string;
  batchSize: number;
  partitionsConcurrency: number;
  /** Apply transactions in flight at once (the coalescer's bound); default DEFAULT_APPLY_TRANSACTIONS. */
  applyTransactions?: number;
  sessionTimeoutMs: number;
  /** Offset commits at most this often; default DEFAULT_OFFSET_COMMIT_INTERVAL_MS. */
  offsetCommitIntervalMs?: number;
  maxBytesPerPartition: number;
  relayBatchSize: number;
  relayBatchBytes: number;
  relayPollMs: number;
  relaySendTimeoutMs: number;
  /** How long the relay's stop goes on publishing (STOP_DRAIN_MS by default; 0: not at all). */
  relayStopDrainMs?: number;
  /** The bound on close(), steps and all; default DEFAULT_STOP_TIMEOUT_MS. */
  stopTimeoutMs?: number;
  /** The relay producer's transactional.id; default `<appliedTopic>.relay`. */
  relayTransactionalId?: string;
  crashAt?: CrashPoint;
  crashAfter: number;
  /** Retry topics `<events>.retry.1..n`; default 4. */
  retryLevels?: number;
  /** Retry delays, outage probe backoff, fault injection; default: production defaults, no faults. */
  failures?: FailureSettings;
  /** Retention (shared/domain/retention); the loop runs only when set and enabled (workerConfigFromEnv: on by default). */
  retention?: RetentionSettings;
  /**
   * Pull snapshots from provider APIs (shared/domain/reconcile). From a file: off unless a source
   * declares `reconcile`. From Postgres: always set (sources empty at first), so a source can gain
   * `reconcile` while the worker runs.
   */
  reconcile?: WorkerReconcileConfig;
  /** Set when SOURCES_FROM=postgres: the reconcile sources follow the sources tables. */
  liveSources?: WorkerLiveSourcesConfig;
}

export interface WorkerLiveSourcesConfig {
  /** Where each source's `reconcile.auth.env` is read (the worker's environment). */
  env: Record<string, string | undefined>;
  /** How often the configuration version is checked besides LISTEN (default DEFAULT_CONFIG_POLL_MS). */
  pollMs?: number;
  /** How often the worker reports the version it serves (bridge_config_instances). */
  reportMs?: number;
}

export interface WorkerReconcileConfig {
  sources: ReconcileSource[];
  /** Pulls running at once, across sources (each source has its own rate limit and breaker too). */
  concurrency: number;
  /** Triggers waiting at most; more are recorded in reconcile_pulls and pulled later (and counted). */
  queueLimit: number;
  /** How often to look for due pulls in reconcile_pulls (default DEFAULT_RETRY_POLL_MS). */
  retryPollMs?: number;
}

/**
 * Throws SourcesConfigError when the sources file is unreadable or a reconcile credential is missing
 * (from Postgres such a source is left out and logged instead: a change must not stop a worker).
 */
export function workerConfigFromEnv(env: WorkerEnv, rawEnv: Record<string, string | undefined> = process.env): WorkerConfig {
  const live = env.SOURCES_FROM === 'postgres';
  const reconcileSources = live || env.WEBHOOK_SOURCES_FILE === undefined ? [] : loadReconcileSources(env.WEBHOOK_SOURCES_FILE, rawEnv);
  return {
    brokers: env.KAFKA_BROKERS,
    clientId: env.KAFKA_CLIENT_ID ?? 'worker',
    databaseUrl: env.DATABASE_URL,
    databasePoolSize: env.DATABASE_POOL_SIZE,
    statementTimeoutMs: env.DATABASE_STATEMENT_TIMEOUT_MS,
    idleInTransactionTimeoutMs: env.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    logLevel: env.LOG_LEVEL,
    role: env.WORKER_ROLE,
    logBufferBytes: env.LOG_BUFFER_BYTES,
    eventsTopic: env.TOPIC_EVENTS,
    appliedTopic: env.TOPIC_APPLIED,
    adminPort: env.ADMIN_PORT ?? (env.WORKER_ROLE === 'relay' ? DEFAULTS.adminPort.relay : DEFAULTS.adminPort.worker),
    adminHost: env.ADMIN_HOST,
    groupId: env.CONSUMER_GROUP,
    batchSize: env.WORKER_BATCH_SIZE,
    partitionsConcurrency: env.WORKER_PARTITIONS_CONCURRENCY,
    applyTransactions: env.WORKER_APPLY_TRANSACTIONS,
    sessionTimeoutMs: env.WORKER_SESSION_TIMEOUT_MS,
    offsetCommitIntervalMs: env.WORKER_OFFSET_COMMIT_INTERVAL_MS,
    maxBytesPerPartition: env.WORKER_MAX_BYTES_PER_PARTITION,
    relayBatchSize: env.RELAY_BATCH_SIZE,
    relayBatchBytes: env.RELAY_BATCH_BYTES,
    relayPollMs: env.RELAY_POLL_MS,
    relaySendTimeoutMs: env.RELAY_SEND_TIMEOUT_MS,
    relayStopDrainMs: env.RELAY_STOP_DRAIN_MS,
    stopTimeoutMs: env.WORKER_STOP_TIMEOUT_MS,
    ...(env.RELAY_TRANSACTIONAL_ID === undefined ? {} : { relayTransactionalId: env.RELAY_TRANSACTIONAL_ID }),
    ...(env.WORKER_CRASH_AT === undefined ? {} : { crashAt: env.WORKER_CRASH_AT }),
    crashAfter: env.WORKER_CRASH_AFTER,
    retryLevels: env.TOPIC_RETRY_LEVELS,
    failures: failureSettingsFrom(env),
    retention: retentionSettingsFrom(env),
    ...(reconcileSources.length === 0 && !live
      ? {}
      : { reconcile: { sources: reconcileSources, concurrency: env.RECONCILE_CONCURRENCY, queueLimit: env.RECONCILE_QUEUE_LIMIT } }),
    ...(live ? { liveSources: { env: rawEnv } } : {}),
  };
}
