export { classifyFailure, OUTAGE_CODES, PERMANENT_CODES, permanentFailure } from './classify-failure.ts';
export type { ClassifiedFailure, FailureClass } from './classify-failure.ts';
export { DeadLetter, isDeadLetter } from './dead-letter.ts';
export { SQLSTATE, SQLSTATE_CLASS, sqlstateOf } from './sqlstate.ts';
export {
  decodeDeadLetterInfo,
  decodeRetryInfo,
  DLQ_HEADERS,
  encodeDeadLetterInfo,
  encodeRetryInfo,
  FAILURE_HEADER_PREFIXES,
  MAX_ERROR_MESSAGE_BYTES,
  originalHeaders,
  RETRY_HEADERS,
  truncateUtf8,
} from './retry-headers.ts';
export type { DeadLetterInfo, DecodeResult, RetryInfo } from './retry-headers.ts';
export { defaultRetrySchedule, probeDelayMs, retryDelayMs } from './backoff.ts';
export type { RetrySchedule } from './backoff.ts';
export { faultInjectSchema, FaultInjector, InjectedFault } from './fault-injection.ts';
export type { FaultKind, FaultRule } from './fault-injection.ts';
export { defaultFailureSettings, failureSettingsFrom, failuresEnv } from './failures-env.ts';
export type { FailureSettings, FailuresEnv } from './failures-env.ts';
export { createFailureMetrics } from './failure-metrics.ts';
export type { FailureMetrics } from './failure-metrics.ts';
export { rethrowFailure } from './failure-contract.ts';
export type { FailureContext, FailureDecision, OnFailure, OnQuarantined } from './failure-contract.ts';
