import type { Admin, Consumer, Kafka } from '#plumbing/kafka/types.ts';
import type { Pool } from 'pg';
import { Registry } from 'prom-client';
import { SnapshotApplier } from '#domain/apply/index.ts';
import { oldestUnpublishedOutboxAge } from '#domain/store/outbox.ts';
import { defaultFailureSettings, FaultInjector, type FailureSettings, type OnFailure, type OnQuarantined } from '#domain/failures/index.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { topicLayouts } from '#plumbing/kafka/partitioned-send.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import { TRACING_OFF, type Tracing } from '#plumbing/observability/tracing.ts';
import { DEFAULT_APPLY_TRANSACTIONS, type WorkerConfig } from './config.ts';
import { createCrashPoints, type CrashPoints } from './crash-points.ts';
import { FaultInjectingApplier } from './retry/fault-injecting-applier.ts';
import { ApplyCoalescer } from './apply/apply-coalescer.ts';
import { createWorkerMetrics, type WorkerMetrics } from './metrics.ts';
import { createRelayPool, OutboxRelay, relayParts, STOP_DRAIN_MS, type RelayHandle } from './relay/index.ts';
import { OutboxNotifier } from './relay/notify.ts';

// The worker's composition root: every client and part built from the config once, nothing
// connected yet. worker.ts starts and stops them in order (the lifecycle).

export interface WorkerDeps {
  logger?: Logger;
  pool?: Pool;
  kafka?: Kafka;
  registry?: Registry;
  /** The apply path; default `new SnapshotApplier({ pool })`. */
  applier?: SnapshotApplier;
  /** Where a record goes when it cannot be applied (invalid envelope, failed transaction). Default: the
   * failure path (retry topics, DLQ, outage pause), which also starts the retry consumers. */
  onFailure?: OnFailure;
  /** Called for each quarantined delivery after its anomaly row is committed. Default: to the DLQ. */
  onQuarantined?: OnQuarantined;
  /** The consumer crashed and kafkajs will not restart it. main.ts exits 1 so the supervisor restarts. */
  onFatal?: (error: unknown) => void;
  /** Skip the admin HTTP server (benchmarks, tests that run several workers). */
  adminServer?: boolean;
  /** OpenTelemetry (main.ts builds it from the OTEL_* variables); off by default. */
  tracing?: Tracing;
}

export interface WorkerParts {
  logger: Logger;
  pool: Pool;
  /** The pool was made here (not passed in), so closing the worker ends it. */
  ownPool: boolean;
  registry: Registry;
  metrics: WorkerMetrics;
  crashPoints: CrashPoints;
  failureSettings: FailureSettings;
  applier: SnapshotApplier;
  /** The main consumer's apply path: concurrent partition chunks share one transaction. */
  coalescer: ApplyCoalescer;
  kafka: Kafka;
  /** The main consumer of the events topic. */
  consumer: Consumer;
  /** For the partition layout of the applied topic (the relay) and nothing else. */
  metadataAdmin: Admin;
  tracing: Tracing;
}

export function composeWorker(config: WorkerConfig, deps: WorkerDeps = {}): WorkerParts {
  const logger = deps.logger ?? createLogger({ name: 'worker', level: config.logLevel });
  const pool =
    deps.pool ??
    createPool({
      url: config.databaseUrl,
      max: config.databasePoolSize,
      statementTimeoutMs: config.statementTimeoutMs,
      ...(config.idleInTransactionTimeoutMs === undefined ? {} : { idleInTransactionTimeoutMs: config.idleInTransactionTimeoutMs }),
      applicationName: 'worker',
      logger,
    });
  const registry = deps.registry ?? new Registry();
  const metrics = createWorkerMetrics(registry, () => oldestUnpublishedOutboxAge(pool));
  const failureSettings = config.failures ?? defaultFailureSettings;
  const faults = new FaultInjector(failureSettings.faults);
  if (faults.enabled) logger.warn({ faults: failureSettings.faults }, 'FAULT_INJECT is set: injecting test failures');
  const tracing = deps.tracing ?? TRACING_OFF;
  const applier =
    deps.applier ?? (faults.enabled ? new FaultInjectingApplier({ pool, tracing }, faults) : new SnapshotApplier({ pool, tracing }));
  const kafka = deps.kafka ?? createKafka({ brokers: config.brokers, clientId: config.clientId, logger });
  const consumer = kafka.consumer({
    groupId: config.groupId,
    sessionTimeout: config.sessionTimeoutMs,
    heartbeatInterval: Math.max(1000, Math.floor(config.sessionTimeoutMs / 10)),
    maxBytesPerPartition: config.maxBytesPerPartition,
    maxWaitTimeInMs: 500,
  });
  return {
    logger,
    pool,
    ownPool: deps.pool === undefined,
    registry,
    metrics,
    crashPoints: createCrashPoints(config.crashAt, config.crashAfter),
    failureSettings,
    applier,
    coalescer: new ApplyCoalescer({
      applyBatch: (records) => applier.applyBatch(records),
      maxRecords: config.batchSize,
      maxInFlight: config.applyTransactions ?? DEFAULT_APPLY_TRANSACTIONS,
      onTransaction: (records, seconds) => {
        metrics.transactionEvents.observe(records);
        metrics.batchDuration.observe(seconds);
      },
    }),
    kafka,
    consumer,
    metadataAdmin: kafka.admin(),
    tracing,
  };
}

export function relayTransactionalId(config: Pick<WorkerConfig, 'appliedTopic' | 'relayTransactionalId'>): string {
  return config.relayTransactionalId ?? `${config.appliedTopic}.relay`;
}

/** Starts the outbox relay on the worker's event loop, with a Postgres pool of its own. */
export function startRelay(config: WorkerConfig, parts: WorkerParts): RelayHandle {
  const { logger, metrics } = parts;
  const relayLogger = logger.child({ component: 'outbox-relay' });
  const pool = createRelayPool({
    url: config.databaseUrl,
    statementTimeoutMs: config.statementTimeoutMs,
    idleInTransactionTimeoutMs: config.idleInTransactionTimeoutMs,
    logger: relayLogger,
  });
  const relay = new OutboxRelay({
    pool,
    ...relayParts({
      kafka: parts.kafka,
      databaseUrl: config.databaseUrl,
      transactionalId: relayTransactionalId(config),
      logger: relayLogger,
      sendTimeoutMs: config.relaySendTimeoutMs,
    }),
    layout: topicLayouts(parts.metadataAdmin),
    topic: config.appliedTopic,
    batchSize: config.relayBatchSize,
    batchBytes: config.relayBatchBytes,
    pollMs: config.relayPollMs,
    sendTimeoutMs: config.relaySendTimeoutMs,
    stopDrainMs: config.relayStopDrainMs ?? STOP_DRAIN_MS,
    logger: relayLogger,
    onPublished: (count) => metrics.relayPublished.inc(count),
    tracing: parts.tracing,
    crashPoints: parts.crashPoints,
  });
  relay.start();
  let stopped: Promise<void> | undefined;
  return {
    get running() {
      return relay.running;
    },
    nudge: () => relay.nudge(),
    stop: () => (stopped ??= relay.stop().finally(() => pool.end())),
  };
}

/**
 * WORKER_ROLE=apply: no relay in this process. Where the inline relay is nudged after each commit,
 * the relay processes are told over Postgres (NOTIFY, relay/notify.ts).
 */
export function notifyRelayProcesses(parts: WorkerParts): RelayHandle {
  const notifier = new OutboxNotifier(parts.pool, parts.logger.child({ component: 'outbox-notify' }));
  return { running: true, nudge: () => notifier.nudge(), stop: () => notifier.settled() };
}
