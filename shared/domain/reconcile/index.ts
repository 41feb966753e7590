export { CircuitBreaker, type BreakerState } from './circuit-breaker.ts';
export { fetchSnapshot, parseSnapshotBody, type ProviderAnswer } from './provider-client.ts';
export { createEventsPublisher, type EventsPublisher } from './publisher.ts';
export { ReconcileQueue, type EnqueueResult, type QueuedReconcile } from './reconcile-queue.ts';
export {
  RECONCILE_TRIGGERS,
  Reconciler,
  type EventsRecord,
  type ReconcileOutcome,
  type ReconcileReport,
  type ReconcileRequest,
  type ReconcilerOptions,
  type ReconcileTrigger,
} from './reconciler.ts';
export { TokenBucket } from './token-bucket.ts';
export { reconcileTriggerFor } from './triggers.ts';
export { expandUrlTemplate, type ResourceRefValues } from './url-template.ts';
