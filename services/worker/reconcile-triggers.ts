import type { Kafka } from 'kafkajs';
import type { Pool } from 'pg';
import type { ApplyResult } from '#domain/apply/index.ts';
import { sourceHeader } from '#domain/contract/event-headers.ts';
import { createEventsPublisher, ReconcileQueue, Reconciler, reconcileTriggerFor } from '#domain/reconcile/index.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { WorkerReconcileConfig } from './config.ts';
import type { WorkerMetrics } from './metrics.ts';

export interface WorkerReconcile {
  reconciler: Reconciler;
  /** Looks at committed results and queues the pulls they call for; never waits for one. */
  onResults: (results: readonly ApplyResult[]) => void;
  /** Nothing queued or running (tests). */
  idle: () => Promise<void>;
  close: () => Promise<void>;
}

/**
 * The worker's side of push-then-pull: after a transaction commits, results that show a missing
 * event (a version gap, an update for an unseen resource) or an anomaly (quarantine) queue a pull
 * of that resource from its source's API. The partition goes on at once; the pulled snapshot comes
 * back through the events topic and the same apply path.
 */
export function startWorkerReconcile(options: {
  config: WorkerReconcileConfig;
  kafka: Kafka;
  pool: Pool;
  eventsTopic: string;
  logger: Logger;
  metrics: WorkerMetrics;
}): WorkerReconcile {
  const { config, metrics } = options;
  const logger = options.logger.child({ component: 'reconcile' });
  const publisher = createEventsPublisher(options.kafka, { topic: options.eventsTopic, logger });
  const reconciler = new Reconciler({ pool: options.pool, sources: config.sources, publish: publisher.publish });
  const bySource = new Map(config.sources.map((s) => [s.id, s]));
  const queue = new ReconcileQueue({
    concurrency: config.concurrency,
    limit: config.queueLimit,
    onError: (error, key) => logger.error({ err: error, resource_key: key }, 'reconciliation failed unexpectedly'),
  });

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
      const fields = { resource_key: result.resourceKey, trigger, source: source.id, event_id: result.eventId, version: result.version };
      const queued = queue.enqueue({
        key: result.resourceKey,
        run: async () => {
          try {
            const report = await reconciler.reconcile({
              tenantId,
              type,
              id,
              trigger,
              sourceId: source.id,
              ...(result.version === undefined ? {} : { seenVersion: result.version }),
            });
            metrics.reconciliations.inc({ trigger, outcome: report.outcome });
            const line = {
              ...fields,
              outcome: report.outcome,
              attempts: report.attempts,
              stored_version: report.storedVersion,
              fetched_status: report.fetched?.status,
              fetched_version: report.fetched?.version,
              reconcile_event_id: report.published ? report.event?.event_id : undefined,
              reason: report.reason,
            };
            if (report.outcome === 'failed' || report.outcome === 'circuit_open' || report.outcome === 'invalid')
              logger.warn(line, 'reconciliation did not apply');
            else logger.info(line, 'reconciled');
          } catch (error) {
            metrics.reconciliations.inc({ trigger, outcome: 'error' });
            throw error;
          }
        },
      });
      if (queued === 'dropped') {
        metrics.reconciliations.inc({ trigger, outcome: 'dropped' });
        logger.warn(fields, 'reconcile queue full; trigger dropped');
      }
    }
  };

  return {
    reconciler,
    onResults,
    idle: () => queue.idle(),
    close: async () => {
      await queue.close();
      await publisher.close();
    },
  };
}
