import type { Consumer, Kafka } from 'kafkajs';
import type { Pool } from 'pg';
import { Registry } from 'prom-client';
import { applySql, SnapshotApplier } from '#domain/apply/index.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { topicLayouts } from '#plumbing/kafka/partitioned-send.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import { startAdminServer, type AdminServer } from '#plumbing/observability/admin-server.ts';
import { defaultFailureSettings, FaultInjector } from '#domain/failures/index.ts';
import { topicNames } from '#plumbing/kafka/topics.ts';
import { createBatchHandler, type OnFailure, type OnQuarantined } from './batch-handler.ts';
import type { WorkerConfig } from './config.ts';
import { createCrashPoints } from './crash-points.ts';
import { createWorkerMetrics, retentionObserver, type WorkerMetrics } from './metrics.ts';
import { startRetentionLoop, type RetentionLoop } from '#domain/retention/index.ts';
import { OutboxRelay, relayParts } from './outbox-relay.ts';
import { startRelayThread, type RelayHandle } from './relay-thread.ts';
import { FaultInjectingApplier } from './failures/fault-injecting-applier.ts';
import { startFailureHandling, type FailureHandling } from './failures/failure-handling.ts';

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
}

export interface WorkerHandle {
  registry: Registry;
  metrics: WorkerMetrics;
  applier: SnapshotApplier;
  consumer: Consumer;
  /** The failure path (undefined when deps.onFailure replaces it). */
  failures: FailureHandling | undefined;
  relay: RelayHandle;
  /** The retention loop (undefined unless config.retention.enabled). */
  retention: RetentionLoop | undefined;
  pool: Pool;
  adminPort: number | undefined;
  /** Stop fetching from the events topic (every partition) until resume(). */
  pause: () => void;
  resume: () => void;
  close: () => Promise<void>;
}

export function relayTransactionalId(config: Pick<WorkerConfig, 'appliedTopic' | 'relayTransactionalId'>): string {
  return config.relayTransactionalId ?? `${config.appliedTopic}.relay`;
}

export async function startWorker(config: WorkerConfig, deps: WorkerDeps = {}): Promise<WorkerHandle> {
  const startRelay = async (): Promise<RelayHandle> => {
    if ((config.relayMode ?? 'thread') === 'thread') {
      return startRelayThread(
        {
          brokers: config.brokers,
          clientId: config.clientId,
          databaseUrl: config.databaseUrl,
          statementTimeoutMs: config.statementTimeoutMs,
          ...(config.idleInTransactionTimeoutMs === undefined ? {} : { idleInTransactionTimeoutMs: config.idleInTransactionTimeoutMs }),
          logLevel: config.logLevel,
          appliedTopic: config.appliedTopic,
          batchSize: config.relayBatchSize,
          pollMs: config.relayPollMs,
          sendTimeoutMs: config.relaySendTimeoutMs,
          transactionalId: relayTransactionalId(config),
          ...(config.crashAt === undefined ? {} : { crashAt: config.crashAt }),
          crashAfter: config.crashAfter,
        },
        { logger, metrics, onFatal: (error) => deps.onFatal?.(error) },
      );
    }
    const relayLogger = logger.child({ component: 'outbox-relay' });
    const relay = new OutboxRelay({
      pool,
      ...relayParts({
        kafka,
        databaseUrl: config.databaseUrl,
        transactionalId: relayTransactionalId(config),
        logger: relayLogger,
        sendTimeoutMs: config.relaySendTimeoutMs,
      }),
      layout: topicLayouts(metadataAdmin),
      topic: config.appliedTopic,
      batchSize: config.relayBatchSize,
      pollMs: config.relayPollMs,
      sendTimeoutMs: config.relaySendTimeoutMs,
      logger: relayLogger,
      onPublished: (count) => metrics.relayPublished.inc(count),
      crashPoints,
    });
    relay.start();
    return relay;
  };

  const logger = deps.logger ?? createLogger({ name: 'worker', level: config.logLevel });
  const ownPool = deps.pool === undefined;
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
  const metrics = createWorkerMetrics(registry, async () => {
    const { rows } = await pool.query<{ age_seconds: number }>(applySql.OLDEST_UNPUBLISHED_OUTBOX_AGE);
    return rows[0]?.age_seconds ?? 0;
  });
  const crashPoints = createCrashPoints(config.crashAt, config.crashAfter);
  const failureSettings = config.failures ?? defaultFailureSettings;
  const faults = new FaultInjector(failureSettings.faults);
  if (faults.enabled) logger.warn({ faults: failureSettings.faults }, 'FAULT_INJECT is set: injecting test failures');
  const applier = deps.applier ?? (faults.enabled ? new FaultInjectingApplier({ pool }, faults) : new SnapshotApplier({ pool }));
  const kafka = deps.kafka ?? createKafka({ brokers: config.brokers, clientId: config.clientId, logger });

  const consumer = kafka.consumer({
    groupId: config.groupId,
    sessionTimeout: config.sessionTimeoutMs,
    heartbeatInterval: Math.max(1000, Math.floor(config.sessionTimeoutMs / 10)),
    maxBytesPerPartition: config.maxBytesPerPartition,
    maxWaitTimeInMs: 500,
  });
  const metadataAdmin = kafka.admin();

  let joined = false;
  let crashed = false;
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    joined = true;
    logger.info({ member_id: e.payload.memberId, assignment: e.payload.memberAssignment }, 'joined consumer group');
  });
  consumer.on(consumer.events.CRASH, (e) => {
    logger.error({ err: e.payload.error, restart: e.payload.restart }, 'consumer crashed');
    if (!e.payload.restart) {
      crashed = true;
      deps.onFatal?.(e.payload.error);
    }
  });

  let failures: FailureHandling | undefined;
  let relay: RelayHandle | undefined;
  let admin: AdminServer | undefined;
  try {
    await metadataAdmin.connect();
    failures =
      deps.onFailure === undefined
        ? await startFailureHandling({
            kafka,
            pool,
            databaseUrl: config.databaseUrl,
            names: topicNames({ events: config.eventsTopic, applied: config.appliedTopic, retryLevels: config.retryLevels ?? 4 }),
            groupId: config.groupId,
            consumer,
            settings: failureSettings,
            registry,
            logger,
            sessionTimeoutMs: config.sessionTimeoutMs,
            ...(deps.onFatal === undefined ? {} : { onFatal: deps.onFatal }),
          })
        : undefined;
    const startedRelay = await startRelay();
    relay = startedRelay;
    await consumer.connect();
    await consumer.subscribe({ topics: [config.eventsTopic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: config.partitionsConcurrency,
      eachBatch: createBatchHandler({
        applier,
        batchSize: config.batchSize,
        logger,
        metrics,
        crashPoints,
        onFailure: deps.onFailure ?? failures!.onFailure,
        ...(deps.onQuarantined ? { onQuarantined: deps.onQuarantined } : failures ? { onQuarantined: failures.onQuarantined } : {}),
        afterCommit: () => startedRelay.nudge(),
      }),
    });
    // Retry topics go through the same applier (fault injection included) as the main topic.
    await failures?.startRetryConsumers(
      (record) => applier.apply(record),
      (result) => {
        metrics.processed.inc({ outcome: result.outcome });
        startedRelay.nudge();
      },
    );

    if (deps.adminServer !== false) {
      admin = await startAdminServer({
        port: config.adminPort,
        ...(config.adminHost === undefined ? {} : { host: config.adminHost }),
        registry,
        healthy: () => !crashed,
        ready: async () => {
          let database: boolean | string = true;
          try {
            await pool.query('SELECT 1');
          } catch (error) {
            database = (error as Error).message;
          }
          return {
            ready: joined && !crashed && database === true && startedRelay.running,
            checks: { consumer_group: joined, database, outbox_relay: startedRelay.running },
          };
        },
      });
    }
  } catch (error) {
    // A start that failed half way (the broker or the database not there yet) leaves nothing
    // running behind it, so the caller can simply try again.
    await consumer.disconnect().catch(() => {});
    await failures?.close().catch(() => {});
    await relay?.stop().catch(() => {});
    await metadataAdmin.disconnect().catch(() => {});
    await admin?.close().catch(() => {});
    if (ownPool) await pool.end().catch(() => {});
    throw error;
  }
  const runningRelay = relay!;
  const retention = config.retention?.enabled
    ? startRetentionLoop({ pool, settings: config.retention, logger: logger.child({ component: 'retention' }), ...retentionObserver(metrics) })
    : undefined;
  logger.info({ group: config.groupId, topic: config.eventsTopic, applied_topic: config.appliedTopic }, 'worker started');

  let closing: Promise<void> | undefined;
  return {
    registry,
    metrics,
    applier,
    consumer,
    failures,
    relay: runningRelay,
    retention,
    pool,
    adminPort: admin?.port,
    pause: () => consumer.pause([{ topic: config.eventsTopic }]),
    resume: () => consumer.resume([{ topic: config.eventsTopic }]),
    close: () => {
      closing ??= (async () => {
        // A retention run stops between two batches.
        await retention?.stop();
        // The running batch stops between chunks; only what committed is committed in Kafka.
        await consumer.disconnect();
        await failures?.close();
        await runningRelay.stop();
        await metadataAdmin.disconnect().catch(() => {});
        await admin?.close();
        if (ownPool) await pool.end();
        logger.info('worker stopped');
      })();
      return closing;
    },
  };
}
