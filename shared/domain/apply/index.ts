export { SnapshotApplier } from './snapshot-applier.ts';
export { chunkRows, type ChunkRowsOptions } from './chunk-rows.ts';
export type { SnapshotApplierOptions } from './snapshot-applier.ts';
export {
  decideOutcomes,
  ORDERING_MISMATCH,
  orderingMismatchReason,
  PENDING_INBOX_STATUSES,
  QUARANTINE_REASON,
  tenantScopedKey,
} from './decide.ts';
export type { Decision, KnownInboxRow, KnownState } from './decide.ts';
export {
  APPLIED_HEADER_EVENT_ID,
  APPLIED_HEADER_SOURCE_OFFSET,
  APPLIED_HEADER_SOURCE_PARTITION,
  APPLIED_HEADER_SOURCE_TOPIC,
  appliedHeaders,
  cloudEventHeaders,
  CLOUDEVENTS_SOURCE_PREFIX,
  buildAppliedRecord,
} from './applied-record.ts';
export type { ApplyOutcome, ApplyResult, ParsedEvent, RecordHeaderValue, SourceRecord } from './types.ts';
export { deliveryAttemptOf, toSourceRecord } from './source-record.ts';
