/**
 * Postgres down for every event, not this one: classify-failure's outage codes (the consumer
 * pauses and probes instead of routing the event down the retry chain).
 */
export const DB_OUTAGE_CODES = [
  'db_unavailable',
  'db_connection_lost',
  'db_shutdown',
  'pool_exhausted',
  'db_resources',
  'db_auth',
  'db_missing',
  'connection_exception',
] as const;

/**
 * Every code a BridgeError can carry: stable, low-cardinality, used as a metric label, a retry
 * header value and an inbox reason. A closed list (after platformatic/kafka's error codes), so a
 * dashboard or an alert can name them all and a typo fails typechecking.
 */
export const ERROR_CODES = [
  // The contract: what parseEvent refuses, at the door and again in the worker.
  'invalid_utf8',
  'invalid_json',
  'too_deep',
  'forbidden_key',
  'invalid_string',
  'unknown_event_version',
  'invalid_envelope',
  'invalid_data',
  // An occurred_at further ahead of its arrival than the source's bound.
  'occurred_at_in_future',
  // The apply path and the retry chain.
  'quarantined',
  'ordering_mismatch',
  'apply_conflict',
  'missing_key',
  'invalid_retry_headers',
  'bad_mapping',
  'manual_reject',
  // Postgres, as classify-failure reads its errors.
  ...DB_OUTAGE_CODES,
  'serialization_failure',
  'deadlock_detected',
  'lock_timeout',
  'statement_timeout',
  'constraint_violation',
  'data_exception',
  // The broker: publishing at the ingress, the failure router, the relay, the CLI's replay.
  'broker_unavailable',
  'broker_request_timeout',
  'ack_timeout',
  'record_too_large',
  'shutting_down',
  'producer_connect_timeout',
  'failure_produce_timeout',
  'relay_send_timeout',
  'replay_send_timeout',
  'downstream_timeout',
  // Reconciliation: pulling a snapshot from a provider's API.
  'reconcile_timeout',
  'reconcile_unavailable',
  'reconcile_bad_response',
  'reconcile_circuit_open',
  'reconcile_not_configured',
  'reconcile_publish_timeout',
  'unknown',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One base error with a stable code and whether retrying can help (after kafkajs's retriable split). */
export class BridgeError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  constructor(code: ErrorCode, message: string, options: { retryable: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.name = 'BridgeError';
    this.code = code;
    this.retryable = options.retryable;
  }
}
