export { CircuitBreaker, type BreakerState } from './circuit-breaker.ts';
export { fetchSnapshot, parseSnapshotBody, statedIdentity, type ProviderAnswer, type StatedIdentity } from './provider-client.ts';
export { createEventsPublisher, type EventsPublisher } from './publisher.ts';
export { ReconcileQueue, type EnqueueResult, type QueuedReconcile } from './reconcile-queue.ts';
export {
  RECONCILE_TRIGGERS,
  Reconciler,
  resourceRefProblem,
  type EventsRecord,
  type ReconcileOutcome,
  type ReconcileReport,
  type ReconcileRequest,
  type ReconcilerOptions,
  type ReconcileTrigger,
} from './reconciler.ts';
export { TokenBucket } from './token-bucket.ts';
export { reconcileTriggerFor } from './triggers.ts';
export { expandUrlTemplate, isLoopbackHost, type ExpandedUrl, type ResourceRefValues } from './url-template.ts';
export {
  createOnDemandReconciler,
  isNotConfigured,
  ON_DEMAND_DONE,
  ON_DEMAND_TRIGGER,
  reconcileOnDemand,
  reconcileSourcesFor,
  type OnDemandOptions,
  type OnDemandReconciler,
  type OnDemandRequest,
} from './on-demand.ts';
export { pullRecordChange, type PullAttempt, type PullRecordChange } from './pull-records.ts';
export { MAX_BODY_BYTES } from './provider-client.ts';
