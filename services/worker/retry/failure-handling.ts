import type { Admin, Consumer, Kafka } from '#plumbing/kafka/types.ts';
import type { Pool } from 'pg';
import type { Registry } from 'prom-client';
import type { ApplyResult, SourceRecord } from '#domain/apply/index.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import {
  createFailureMetrics,
  type FailureContext,
  type FailureDecision,
  type FailureMetrics,
  type FailureSettings,
} from '#domain/failures/index.ts';
import { OutageController, postgresProbe } from './outage-controller.ts';
import { startRetryConsumers, type RetryConsumers } from './retry-consumers.ts';
import { startRetryLagMonitor } from './retry-lag-monitor.ts';
import { createFailureProducer, RetryRouter } from './retry-router.ts';

export interface FailureHandlingOptions {
  kafka: Kafka;
  pool: Pool;
  /** For the health probe, which uses a fresh connection rather than the pool. */
  databaseUrl: string;
  names: TopicNames;
  /** The main consumer group and its consumer (paused during an outage). */
  groupId: string;
  consumer: Pick<Consumer, 'pause' | 'resume'>;
  settings: FailureSettings;
  registry: Registry;
  logger: Logger;
  sessionTimeoutMs?: number;
  lagIntervalMs?: number;
  /** A retry consumer crashed and kafkajs will not restart it (main.ts exits so the supervisor restarts). */
  onFatal?: (error: unknown) => void;
}

export interface FailureHandling {
  metrics: FailureMetrics;
  router: RetryRouter;
  outage: OutageController;
  /** The worker's onFailure hook: route a failed record, or pause on an outage. */
  onFailure: (record: SourceRecord, error: unknown, context: FailureContext) => Promise<FailureDecision>;
  /** The worker's onQuarantined hook: an anomaly, or an event of the other ordering than its resource's, goes to the DLQ. */
  onQuarantined: (result: ApplyResult) => Promise<void>;
  /** Starts one consumer per retry topic, applying through `apply` (the same apply path). */
  startRetryConsumers: (apply: (record: SourceRecord) => Promise<ApplyResult>, onApplied?: (result: ApplyResult) => void) => Promise<void>;
  close: () => Promise<void>;
}

/** Wires the failure path around a worker's main consumer: router, outage pause, retry consumers, lag. */
export async function startFailureHandling(options: FailureHandlingOptions): Promise<FailureHandling> {
  const { kafka, pool, names, settings, logger } = options;
  const log = logger.child({ component: 'failures' });
  const metrics = createFailureMetrics(options.registry);
  const probe = postgresProbe(options.databaseUrl);
  const producer = createFailureProducer(kafka, log);
  await producer.connect();
  const router = new RetryRouter({
    producer,
    pool,
    names,
    schedule: settings.schedule,
    produceTimeoutMs: settings.produceTimeoutMs,
    metrics,
    logger: log,
  });
  const outage = new OutageController({
    name: 'main',
    consumer: options.consumer,
    topics: [names.events],
    probe,
    probeInitialMs: settings.probeInitialMs,
    probeMaxMs: settings.probeMaxMs,
    metrics,
    logger: log,
  });
  let retryConsumers: RetryConsumers | undefined;
  let lagMonitor: { close: () => Promise<void> } | undefined;
  let admin: Admin | undefined;

  const onFailure = async (record: SourceRecord, error: unknown): Promise<FailureDecision> => {
    // Another partition already found the database down: leave this record for after the outage.
    if (outage.paused) return 'stop';
    const outcome = await router.handleError(record, error);
    if (outcome.outcome === 'outage') {
      outage.trip(outcome.failure);
      return 'stop';
    }
    return 'handled';
  };

  const onQuarantined = async (result: ApplyResult): Promise<void> => {
    const outcome = await router.handleResult(result);
    if (outcome?.outcome === 'outage') {
      outage.trip(outcome.failure);
      // Throwing leaves the record unresolved, so it is fetched again once the database is back.
      throw new Error(`${result.outcome} event ${result.eventId} not dead-lettered: ${outcome.failure.message}`);
    }
  };

  return {
    metrics,
    router,
    outage,
    onFailure,
    onQuarantined,
    startRetryConsumers: async (apply, onApplied) => {
      retryConsumers = await startRetryConsumers({
        kafka,
        names,
        groupId: options.groupId,
        apply,
        router,
        probe,
        probeInitialMs: settings.probeInitialMs,
        probeMaxMs: settings.probeMaxMs,
        metrics,
        logger: log,
        ...(options.sessionTimeoutMs === undefined ? {} : { sessionTimeoutMs: options.sessionTimeoutMs }),
        ...(onApplied === undefined ? {} : { onApplied }),
        onCrash: (error, restart) => {
          if (!restart) options.onFatal?.(error);
        },
      });
      admin = kafka.admin();
      await admin.connect();
      lagMonitor = startRetryLagMonitor({
        admin,
        levels: names.retries.map((topic, i) => ({ topic, groupId: retryConsumers!.groupIds[i]! })),
        metrics,
        logger: log,
        ...(options.lagIntervalMs === undefined ? {} : { intervalMs: options.lagIntervalMs }),
      });
    },
    close: async () => {
      await lagMonitor?.close();
      await admin?.disconnect().catch(() => {});
      await retryConsumers?.close();
      await outage.close();
      await producer.close();
    },
  };
}
