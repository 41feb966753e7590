import { randomUUID } from 'node:crypto';
import type { Kafka } from '#plumbing/kafka/types.ts';
import type { Pool } from 'pg';
import type { ApplyResult } from '#domain/apply/index.ts';
import { sourceHeader } from '#domain/contract/event-headers.ts';
import type { RetrySchedule } from '#domain/failures/index.ts';
import {
  createEventsPublisher,
  pullRecordChange,
  ReconcileQueue,
  Reconciler,
  reconcileTriggerFor,
  RECONCILE_TRIGGERS,
  type PullAttempt,
  type ReconcileReport,
  type ReconcileTrigger,
} from '#domain/reconcile/index.ts';
import {
  claimDuePulls,
  countPullsByStatus,
  renewPullClaims,
  settlePull,
  takePull,
  updatePullAttempt,
  upsertPendingPull,
  type PullWrite,
} from '#domain/store/index.ts';
import type { ReconcileSource } from '#domain/sources/index.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { WorkerReconcileConfig } from '../config.ts';
import type { WorkerMetrics } from '../metrics.ts';

export interface WorkerReconcile {
  reconciler: Reconciler;
  /**
   * Replaces the sources pulled from (a live configuration change): results after it trigger by
   * the new set; pulls already queued or running finish; owed pulls of a source no longer here wait
   * in reconcile_pulls until a source of that id with reconcile is back.
   */
  setSources: (sources: readonly ReconcileSource[]) => void;
  /** Looks at committed results and queues the pulls they call for; never waits for one. */
  onResults: (results: readonly ApplyResult[]) => void;
  /** Nothing queued or running (tests). */
  idle: () => Promise<void>;
  close: () => Promise<void>;
}

/**
 * A claim on a pull owed lasts this long unrenewed: its worker renews it every third of it while the
 * job waits or runs (however many attempts, timeouts and backoffs one pull takes), so another worker
 * takes the row only once that worker has stopped (died, or frozen past it).
 */
export const PENDING_PULL_LEASE_MS = 60_000;
/** How often the worker looks for due pulls (retries, and pulls lost with a process). */
export const DEFAULT_RETRY_POLL_MS = 1000;
const CLAIM_BATCH = 50;

interface OwedPull {
  tenantId: string;
  type: string;
  id: string;
  key: string;
  trigger: ReconcileTrigger;
  sourceId: string;
  seenVersion: number | undefined;
  /** The token of the job that holds the row (reconcile_pulls.claim). */
  claim: string;
}

/** A taken pull: the row's generation when the pull began, and the attempts recorded before it. */
interface Taken {
  generation: string;
  attemptsBefore: number;
}

/**
 * The worker's side of push-then-pull: after a transaction commits, results that show a missing
 * event (a version gap, an update for an unseen resource) or an anomaly (quarantine) queue a pull
 * of that resource from its source's API. The partition goes on at once; the pulled snapshot comes
 * back through the events topic and the same apply path.
 * Every pull owed is recorded in reconcile_pulls first, so a failed pull, one dropped from a full
 * queue or one lost with its process is retried (the retry chain's schedule), also after a
 * restart; what needs an operator (gone, failed) stays there for the console.
 */
export function startWorkerReconcile(options: {
  config: WorkerReconcileConfig;
  kafka: Kafka;
  pool: Pool;
  eventsTopic: string;
  logger: Logger;
  metrics: WorkerMetrics;
  schedule: RetrySchedule;
  /** How long a claim on an owed pull lasts unrenewed (default PENDING_PULL_LEASE_MS; tests shorten it). */
  leaseMs?: number;
}): WorkerReconcile {
  const { config, metrics, pool, schedule } = options;
  const leaseMs = options.leaseMs ?? PENDING_PULL_LEASE_MS;
  const logger = options.logger.child({ component: 'reconcile' });
  const publisher = createEventsPublisher(options.kafka, { topic: options.eventsTopic, logger });
  const reconciler = new Reconciler({ pool, sources: config.sources, publish: publisher.publish });
  let bySource = new Map(config.sources.map((s) => [s.id, s]));
  const queue = new ReconcileQueue({
    concurrency: config.concurrency,
    limit: config.queueLimit,
    onError: (error, key) => logger.error({ err: error, resource_key: key }, 'reconciliation failed unexpectedly'),
  });
  const ref = (pull: OwedPull) => ({ tenant_id: pull.tenantId, resource_type: pull.type, resource_id: pull.id });
  // The rows this worker's jobs hold, queued or running, by claim: renewed until the job ends.
  const held = new Map<string, OwedPull>();

  const record = async (
    pull: OwedPull,
    taken: Taken,
    attempt: PullAttempt,
    report: ReconcileReport | undefined,
    error?: unknown,
  ): Promise<PullWrite> => {
    const change = pullRecordChange(attempt, taken.attemptsBefore, schedule);
    const fence = { ...ref(pull), claim: pull.claim, generation: taken.generation };
    if (change.kind === 'resolved') return settlePull(pool, fence);
    const reason = report?.reason ?? (error instanceof Error ? error.message : error === undefined ? null : String(error));
    if (change.exhausted) metrics.reconciliations.inc({ trigger: pull.trigger, outcome: 'exhausted' });
    return updatePullAttempt(pool, {
      ...fence,
      status: change.status,
      attempts: change.attempts,
      dueInMs: change.dueInMs,
      outcome: attempt.outcome,
      reason: change.exhausted ? `retries exhausted: ${reason ?? ''}` : reason,
      httpStatus: report?.fetched?.status ?? null,
    });
  };

  const attempt = async (pull: OwedPull, recorded: Promise<unknown>) => {
    try {
      // The pending row first: the answer's update must not be overtaken by it.
      await recorded;
      const row = await takePull(pool, { ...ref(pull), claim: pull.claim, leaseMs });
      if (row === undefined) {
        logger.debug({ resource_key: pull.key, trigger: pull.trigger }, 'pull no longer held by this worker; not pulled');
        return;
      }
      await pullTaken(pull, { generation: row.generation, attemptsBefore: row.attempts });
    } finally {
      held.delete(pull.claim);
    }
  };

  const pullTaken = async (pull: OwedPull, taken: Taken) => {
    const fields = { resource_key: pull.key, trigger: pull.trigger, source: pull.sourceId, attempt: taken.attemptsBefore + 1 };
    let report: ReconcileReport;
    try {
      report = await reconciler.reconcile({
        tenantId: pull.tenantId,
        type: pull.type,
        id: pull.id,
        trigger: pull.trigger,
        sourceId: pull.sourceId,
        ...(pull.seenVersion === undefined ? {} : { seenVersion: pull.seenVersion }),
      });
    } catch (error) {
      metrics.reconciliations.inc({ trigger: pull.trigger, outcome: 'error' });
      await record(pull, taken, { outcome: 'error', retryable: true }, undefined, error);
      throw error;
    }
    metrics.reconciliations.inc({ trigger: pull.trigger, outcome: report.outcome });
    const written = await record(
      pull,
      taken,
      { outcome: report.outcome, retryable: report.error?.retryable ?? false, storedDeleted: report.storedDeleted },
      report,
    );
    const line = {
      ...fields,
      // newer: a trigger came during the pull; the row stays, due now, for a pull after it.
      ...(written === 'written' ? {} : { record: written }),
      outcome: report.outcome,
      attempts: report.attempts,
      stored_version: report.storedVersion,
      fetched_status: report.fetched?.status,
      fetched_version: report.fetched?.version,
      reconcile_event_id: report.published ? report.event?.event_id : undefined,
      reason: report.reason,
    };
    if (report.outcome === 'applied' || report.outcome === 'stale') logger.info(line, 'reconciled');
    else logger.warn(line, 'reconciliation did not apply');
  };

  const onResults = (results: readonly ApplyResult[]) => {
    for (const result of results) {
      const sourceId = sourceHeader(result.record.headers);
      const source = sourceId === undefined ? undefined : bySource.get(sourceId);
      if (!source || !result.resource || !result.resourceKey) continue;
      const { tenantId, type, id } = result.resource;
      // Only for what this source's API answers for (its tenants and resource types, as in the
      // worker's sources file): the ingress may know the same source id with a wider tenant list.
      if (!source.tenants.includes(tenantId) || !source.resourceTypes.includes(type)) continue;
      const trigger = reconcileTriggerFor(result, source.reconcile.maxVersionGap);
      if (trigger === undefined) continue;
      const pull: OwedPull = {
        tenantId,
        type,
        id,
        key: result.resourceKey,
        trigger,
        sourceId: source.id,
        seenVersion: result.version,
        claim: randomUUID(),
      };
      let settled!: () => void;
      const recorded = new Promise<void>((resolve) => (settled = resolve));
      const queued = queue.enqueue({ key: pull.key, run: () => attempt(pull, recorded) });
      const dropped = queued === 'dropped' || queued === 'closed';
      if (queued === 'queued') held.set(pull.claim, pull);
      // Recorded whatever the queue said: a dropped pull comes due on the retry schedule, a queued
      // one only if its process dies before answering. A coalesced one stays with the job holding
      // the row; its generation tells that job's pull, if it already began, that it is not the answer.
      void upsertPendingPull(pool, {
        ...ref(pull),
        source: source.id,
        trigger,
        seen_version: result.version ?? null,
        dueInMs: dropped ? (schedule.delaysMs[0] ?? 0) : leaseMs,
        ...(dropped ? { reason: `reconcile queue ${queued === 'closed' ? 'closed' : 'full'}` } : {}),
        claim: queued === 'queued' ? pull.claim : null,
        keepClaim: queued === 'coalesced',
      })
        .catch((error: unknown) => logger.error({ err: error, resource_key: pull.key }, 'could not record a pull owed'))
        .finally(settled);
      if (dropped) {
        metrics.reconciliations.inc({ trigger, outcome: 'dropped' });
        logger.warn({ resource_key: pull.key, trigger, source: source.id }, 'reconcile queue full; pull recorded for later');
      }
    }
  };

  // Due pulls: retries on the backoff, dropped ones, and those a dead process owed.
  let polling: Promise<void> | undefined;
  const poll = async () => {
    const room = Math.min(CLAIM_BATCH, config.queueLimit - queue.size.waiting);
    if (room > 0 && bySource.size > 0) {
      const due = await claimDuePulls(pool, { sources: [...bySource.keys()], limit: room, leaseMs });
      for (const row of due) {
        const trigger = (RECONCILE_TRIGGERS as readonly string[]).includes(row.trigger) ? (row.trigger as ReconcileTrigger) : 'gap';
        const pull: OwedPull = {
          tenantId: row.tenant_id,
          type: row.resource_type,
          id: row.resource_id,
          key: `${row.tenant_id}/${row.resource_type}/${row.resource_id}`,
          trigger,
          sourceId: row.source,
          seenVersion: row.seen_version === null ? undefined : Number(row.seen_version),
          claim: row.claim!,
        };
        // Coalesced or dropped: the claim, not renewed, lapses and brings it back.
        if (queue.enqueue({ key: pull.key, run: () => attempt(pull, Promise.resolve()) }) === 'queued') held.set(pull.claim, pull);
      }
    }
    const counts = await countPullsByStatus(pool);
    metrics.reconcilePullsOpen.reset();
    for (const { status, count } of counts) metrics.reconcilePullsOpen.set({ status }, count);
  };
  const timer = setInterval(() => {
    polling ??= poll()
      .catch((error: unknown) => logger.warn({ err: error }, 'could not look for due pulls'))
      .finally(() => (polling = undefined));
  }, config.retryPollMs ?? DEFAULT_RETRY_POLL_MS);
  timer.unref();

  let renewing: Promise<void> | undefined;
  const renewal = setInterval(
    () => {
      renewing ??= renewPullClaims(pool, { claims: [...held.values()].map((p) => ({ ...ref(p), claim: p.claim })), leaseMs })
        .catch((error: unknown) => logger.warn({ err: error }, 'could not renew the claims on pulls owed'))
        .finally(() => (renewing = undefined));
    },
    Math.max(10, Math.floor(leaseMs / 3)),
  );
  renewal.unref();

  return {
    reconciler,
    setSources: (sources) => {
      reconciler.setSources(sources);
      bySource = new Map(sources.map((s) => [s.id, s]));
    },
    onResults,
    idle: () => queue.idle(),
    close: async () => {
      clearInterval(timer);
      clearInterval(renewal);
      await polling;
      await renewing;
      await queue.close();
      await publisher.close();
    },
  };
}
