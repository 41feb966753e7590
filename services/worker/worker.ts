import type { Consumer } from '#plumbing/kafka/types.ts';
import type { Pool } from 'pg';
import type { Registry } from 'prom-client';
import type { SnapshotApplier } from '#domain/apply/index.ts';
import { startRetentionLoop, type RetentionLoop } from '#domain/retention/index.ts';
import { topicNames } from '#plumbing/kafka/topics.ts';
import { startAdminServer, type AdminServer } from '#plumbing/observability/admin-server.ts';
import { ping } from '#domain/store/session.ts';
import { coalescedCommits, createBatchHandler, type CoalescedCommits } from './apply/batch-handler.ts';
import { composeWorker, notifyRelayProcesses, startRelay, type WorkerDeps, type WorkerParts } from './composition.ts';
import { DEFAULT_OFFSET_COMMIT_INTERVAL_MS, DEFAULT_STOP_TIMEOUT_MS, type WorkerConfig } from './config.ts';
import { startFailureHandling, type FailureHandling } from './retry/failure-handling.ts';
import { retentionObserver, type WorkerMetrics } from './metrics.ts';
import type { RelayHandle } from './relay/index.ts';
import { startWorkerReconcile, type WorkerReconcile } from './reconcile/reconcile-triggers.ts';
import { followLiveSources } from './reconcile/live-sources.ts';
import type { LiveSources } from '#domain/sources/index.ts';

export type { WorkerDeps } from './composition.ts';
export { relayTransactionalId } from './composition.ts';

export interface WorkerHandle {
  registry: Registry;
  metrics: WorkerMetrics;
  applier: SnapshotApplier;
  consumer: Consumer;
  /** The failure path (undefined when deps.onFailure replaces it). */
  failures: FailureHandling | undefined;
  relay: RelayHandle;
  /** Push-then-pull (undefined unless a source declares `reconcile` or sources come from Postgres). */
  reconcile: WorkerReconcile | undefined;
  /** SOURCES_FROM=postgres: the sources followed while the worker runs (undefined with a file). */
  liveSources: LiveSources | undefined;
  /** The retention loop (undefined unless config.retention.enabled). */
  retention: RetentionLoop | undefined;
  pool: Pool;
  adminPort: number | undefined;
  /** Stop fetching from the events topic (every partition) until resume(). */
  pause: () => void;
  resume: () => void;
  /** Liveness: false only once the consumer has crashed for good (the process must be restarted). */
  healthy: () => boolean;
  /** Readiness: what /readyz answers (false from the moment close() is called). */
  readiness: () => Promise<Readiness>;
  close: () => Promise<void>;
}

export interface Readiness {
  ready: boolean;
  /** true when passing; false or why not (logged by the admin server, never answered). */
  checks: Record<string, boolean | string>;
}

/** What the health endpoints read: has the consumer joined its group, has it crashed for good, is it stopping. */
interface ConsumerState {
  joined: boolean;
  /** Group joins so far (the batch handler tells one membership's commits from the next's). */
  joins: number;
  crashed: boolean;
  stopping: boolean;
  /** Resolves when close() is called (with state.stopping already true). */
  stopped: Promise<void>;
  markStopping: () => void;
}

function watchConsumer(parts: WorkerParts, onFatal: ((error: unknown) => void) | undefined): ConsumerState {
  const { consumer, logger } = parts;
  let markStopping = () => {};
  const stopped = new Promise<void>((resolve) => (markStopping = resolve));
  const state: ConsumerState = {
    joined: false,
    joins: 0,
    crashed: false,
    stopping: false,
    stopped,
    markStopping: () => {
      state.stopping = true;
      markStopping();
    },
  };
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    state.joined = true;
    state.joins += 1;
    logger.info({ member_id: e.payload.memberId, assignment: e.payload.memberAssignment }, 'joined consumer group');
  });
  consumer.on(consumer.events.CRASH, (e) => {
    logger.error({ err: e.payload.error, restart: e.payload.restart }, 'consumer crashed');
    if (!e.payload.restart) {
      state.crashed = true;
      onFatal?.(e.payload.error);
    }
  });
  return state;
}

/** Readiness: joined, not crashed, not stopping, the database answers, the relay runs. */
async function readiness(parts: WorkerParts, state: ConsumerState, relay: RelayHandle): Promise<Readiness> {
  // Stopping: 503 from the first moment of close(), without waiting for a database round trip,
  // also for a probe whose round trip had begun (a loaded database can take seconds to answer).
  const shuttingDown = (): Readiness => ({ ready: false, checks: { consumer_group: state.joined, consuming: 'shutting down' } });
  if (state.stopping) return shuttingDown();
  const pinged = ping(parts.pool).then(
    () => true,
    (error: unknown) => (error as Error).message,
  );
  const database = await Promise.race([pinged, state.stopped.then(() => 'shutting down')]);
  if (state.stopping) return shuttingDown();
  return {
    ready: state.joined && !state.crashed && database === true && relay.running,
    checks: { consumer_group: state.joined, database, outbox_relay: relay.running, consuming: true },
  };
}

/**
 * The worker's lifecycle: starts the parts composeWorker built, in order (failure path, relay,
 * main consumer, retry consumers, admin server, retention), and stops them in reverse. A start
 * that fails half way (the broker or the database not there yet) leaves nothing running, so the
 * caller can simply try again.
 */
export async function startWorker(config: WorkerConfig, deps: WorkerDeps = {}): Promise<WorkerHandle> {
  if (config.role === 'relay') throw new Error('WORKER_ROLE=relay runs startRelayProcess (relay-process.ts), not startWorker');
  const parts = composeWorker(config, deps);
  const { logger, pool, ownPool, registry, metrics, crashPoints, applier, kafka, consumer, metadataAdmin } = parts;
  const state = watchConsumer(parts, deps.onFatal);

  let failures: FailureHandling | undefined;
  let relay: RelayHandle | undefined;
  let offsetCommits: CoalescedCommits | undefined;
  let admin: AdminServer | undefined;
  const reconcile =
    config.reconcile === undefined
      ? undefined
      : startWorkerReconcile({
          config: config.reconcile,
          kafka,
          pool,
          eventsTopic: config.eventsTopic,
          logger,
          metrics,
          schedule: parts.failureSettings.schedule,
        });
  const liveSources =
    config.liveSources === undefined || reconcile === undefined
      ? undefined
      : followLiveSources({ config: config.liveSources, pool, databaseUrl: config.databaseUrl, reconcile, registry, logger });
  try {
    // The first snapshot before the first record: a result that calls for a pull must find its source.
    await liveSources?.start();
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
            settings: parts.failureSettings,
            registry,
            logger,
            sessionTimeoutMs: config.sessionTimeoutMs,
            ...(deps.onFatal === undefined ? {} : { onFatal: deps.onFatal }),
          })
        : undefined;
    const startedRelay = config.role === 'apply' ? notifyRelayProcesses(parts) : startRelay(config, parts);
    relay = startedRelay;
    await consumer.connect();
    await consumer.subscribe({ topics: [config.eventsTopic], fromBeginning: true });
    offsetCommits = coalescedCommits({ minIntervalMs: config.offsetCommitIntervalMs ?? DEFAULT_OFFSET_COMMIT_INTERVAL_MS });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: config.partitionsConcurrency,
      eachBatch: createBatchHandler({
        applier,
        applyChunk: (chunk) => parts.coalescer.apply(chunk),
        batchSize: config.batchSize,
        logger,
        metrics,
        crashPoints,
        onFailure: deps.onFailure ?? failures!.onFailure,
        ...(deps.onQuarantined ? { onQuarantined: deps.onQuarantined } : failures ? { onQuarantined: failures.onQuarantined } : {}),
        afterCommit: () => startedRelay.nudge(),
        ...(reconcile ? { afterApply: reconcile.onResults } : {}),
        commits: offsetCommits,
        stopping: () => state.stopping,
        joins: () => state.joins,
      }),
    });
    // Retry topics go through the same applier (fault injection included) as the main topic.
    await failures?.startRetryConsumers(
      (record) => applier.apply(record),
      (result) => {
        metrics.processed.inc({ outcome: result.outcome });
        startedRelay.nudge();
        reconcile?.onResults([result]);
      },
    );

    if (deps.adminServer !== false) {
      admin = await startAdminServer({
        port: config.adminPort,
        ...(config.adminHost === undefined ? {} : { host: config.adminHost }),
        registry,
        healthy: () => !state.crashed,
        ready: () => readiness(parts, state, startedRelay),
      });
    }
  } catch (error) {
    await consumer.disconnect().catch(() => {});
    await liveSources?.stop().catch(() => {});
    await reconcile?.close().catch(() => {});
    await failures?.close().catch(() => {});
    await relay?.stop().catch(() => {});
    await metadataAdmin.disconnect().catch(() => {});
    await admin?.close().catch(() => {});
    if (ownPool) await pool.end().catch(() => {});
    throw error;
  }
  const runningRelay = relay!;
  const retention = config.retention?.enabled
    ? startRetentionLoop({
        pool,
        settings: config.retention,
        logger: logger.child({ component: 'retention' }),
        ...retentionObserver(metrics),
      })
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
    reconcile,
    liveSources,
    pool,
    adminPort: admin?.port,
    pause: () => consumer.pause([{ topic: config.eventsTopic }]),
    resume: () => consumer.resume([{ topic: config.eventsTopic }]),
    healthy: () => !state.crashed,
    readiness: () => readiness(parts, state, runningRelay),
    close: () => {
      state.markStopping();
      closing ??= (async () => {
        // How long each step took, in the last line (the drain an orchestrator's grace period must cover).
        const steps: Record<string, number> = {};
        const stopTimeoutMs = config.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS;
        const deadline = performance.now() + stopTimeoutMs;
        let mark = performance.now();
        let late = false;
        // Each step gets what is left of the bound. One that outlives it is left running and the
        // stop ends there, as a SIGKILL at the end of the grace period would end it, but with a line
        // that names the step.
        const step = async (name: string, run: () => Promise<unknown> | undefined) => {
          if (late) return;
          let timer: NodeJS.Timeout | undefined;
          const outOfTime = new Promise<'late'>((resolve) => {
            timer = setTimeout(() => resolve('late'), Math.max(0, deadline - performance.now()));
          });
          const outcome = await Promise.race([Promise.resolve(run()).then(() => 'done' as const), outOfTime]).finally(() =>
            clearTimeout(timer),
          );
          const now = performance.now();
          steps[name] = Math.round(now - mark);
          mark = now;
          if (outcome === 'late') {
            late = true;
            logger.warn(
              { step: name, stop_ms: steps, stop_timeout_ms: stopTimeoutMs },
              'worker stop ran out of time (WORKER_STOP_TIMEOUT_MS): exiting with this step unfinished; what it did not commit is redelivered',
            );
          }
        };
        // A retention run stops between two batches.
        await step('retention', () => retention?.stop());
        // A batch that ended before the stop began committed its offsets in the background: wait
        // for that commit, or the group is left with it in flight and its offsets are redelivered.
        await step('commits', () => offsetCommits?.settled());
        // The running batch stops between chunks; only what committed is committed in Kafka.
        await step('consumer', () => consumer.disconnect());
        await step('sources', () => liveSources?.stop());
        // Running pulls finish (their snapshot is published or not); waiting ones are dropped.
        await step('reconcile', () => reconcile?.close());
        await step('failures', () => failures?.close());
        // Nothing more is applied here: the relay publishes up to the newest applied record (bounded,
        // see STOP_DRAIN_MS in relay/stop-drain.ts), then stops.
        await step('relay', () => runningRelay.stop());
        if (late) return;
        await metadataAdmin.disconnect().catch(() => {});
        await admin?.close();
        if (ownPool) await pool.end();
        logger.info({ stop_ms: steps }, 'worker stopped');
      })();
      return closing;
    },
  };
}
