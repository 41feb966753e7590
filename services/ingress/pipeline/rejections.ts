import type { ParseErrorCode } from '#domain/contract/index.ts';
import { describeFutureOccurredAt, type FutureOccurredAt } from '#domain/contract/occurred-at-bound.ts';
import type { SignatureFailureReason } from '#domain/signing/index.ts';
import type { PublishErrorCode } from '../publisher.ts';
import type { MatchedEvent } from './matched-event.ts';

// Every way the ingress refuses a request, and the one table that says how each is answered.

/**
 * Refused before the body is read: node:http discards a body of known, bounded length and keeps
 * the connection; a body of unknown or excessive length (bodyUnbounded) is cut off with it.
 */
interface BeforeBody {
  bodyUnbounded: boolean;
}

/** Refused once the envelope is known: the request line names the event. */
interface AboutEvent {
  event: MatchedEvent;
}

type Plain<K extends string> = K extends string ? { kind: K } : never;

/** What verifySignature refuses, one kind per reason (all answered alike: the reason helps a forger). */
export type SignatureRejectionKind = `signature_${SignatureFailureReason}`;

type ParseRejection<K extends ParseErrorCode = ParseErrorCode> = K extends ParseErrorCode
  ? { kind: K; message: string; bodySha256: string }
  : never;

type PublishRejection<K extends PublishErrorCode = PublishErrorCode> = K extends PublishErrorCode ? { kind: K } & AboutEvent : never;

export type Rejection =
  // preflight
  | { kind: 'shutting_down' }
  | ({ kind: 'sources_not_loaded' } & BeforeBody)
  | { kind: 'body_too_large' }
  | ({ kind: 'unsupported_media_type' } & BeforeBody)
  | ({ kind: 'missing_header'; header: string } & BeforeBody)
  | ({ kind: 'repeated_header'; header: string } & BeforeBody)
  | ({ kind: 'repeated_optional_header' } & BeforeBody)
  | ({ kind: 'event_id_headers_differ'; header: string; alias: string } & BeforeBody)
  | ({ kind: 'malformed_retry_header'; header: string } & BeforeBody)
  | ({ kind: 'malformed_timestamp'; header: string; forms: string } & BeforeBody)
  | { kind: 'inflight_body_bytes' }
  | { kind: 'client_body_bytes' }
  | { kind: 'body_idle_timeout' }
  | { kind: 'body_timeout' }
  // verify
  | { kind: 'unknown_source' }
  | Plain<SignatureRejectionKind>
  // the source's own limits, for verified requests only
  | { kind: 'source_rate_limited'; limit: 'requests' | 'bytes'; retryAfterSeconds: number }
  // parse and match
  | ParseRejection
  | ({ kind: 'event_id_mismatch'; header: string } & AboutEvent)
  | ({ kind: 'event_type_mismatch'; header: string } & AboutEvent)
  | ({ kind: 'idempotency_key_mismatch'; header: string } & AboutEvent)
  | ({ kind: 'resource_type_not_allowed'; resourceType: string; allowed: readonly string[] } & AboutEvent)
  | ({ kind: 'tenant_not_allowed' } & AboutEvent)
  | ({ kind: 'strict_schema'; problem: string } & AboutEvent)
  | ({ kind: 'occurred_at_in_future'; ahead: FutureOccurredAt } & AboutEvent)
  // publish (shutting_down again: the publisher closed after the request was let in)
  | PublishRejection
  // the adapters
  | { kind: 'not_found' }
  | { kind: 'internal_error' };

export type RejectionKind = Rejection['kind'];

export interface RejectionAnswer<R extends Rejection = Rejection> {
  status: number;
  /**
   * The `reason` of the request log line; also the `reason` label where the rejection is counted
   * (webhook_signature_failures_total, webhook_overload_refusals_total).
   */
  reason: string;
  /** The body's `error`. */
  code: string;
  /** The body's `message`, when it has one. */
  message?: string | ((rejection: R) => string);
  /** Answered with Retry-After (the condition is expected to pass). */
  retryAfter?: true;
  /** The connection is closed whether or not the body was read. */
  closeConnection?: true;
  /** Counted in webhook_signature_failures_total (refused before or during verification). */
  signatureFailure?: true;
  /** Counted in webhook_overload_refusals_total. */
  overload?: true;
  /** Counted in webhook_event_refusals_total: a verified, well-formed event refused for what it says. */
  eventRefusal?: true;
}

const UNAUTHORIZED = { status: 401, code: 'unauthorized', signatureFailure: true } as const;
const UNAVAILABLE = { status: 503, code: 'unavailable', retryAfter: true } as const;
const REQUEST_TIMEOUT = { status: 408, code: 'request_timeout', closeConnection: true, overload: true } as const;

/**
 * kind -> how it is answered. The caller learns only the status and the body: which check of the
 * signature failed goes to logs and metrics only, and an unknown source is answered like a bad
 * signature, so the answers do not tell which source ids exist.
 */
export const REJECTIONS: { readonly [K in RejectionKind]: RejectionAnswer<Extract<Rejection, { kind: K }>> } = {
  shutting_down: { ...UNAVAILABLE, reason: 'shutting_down', closeConnection: true },
  sources_not_loaded: { ...UNAVAILABLE, reason: 'sources_not_loaded' },
  body_too_large: { status: 413, reason: 'body_too_large', code: 'payload_too_large', closeConnection: true },
  unsupported_media_type: { status: 415, reason: 'unsupported_media_type', code: 'unsupported_media_type' },
  missing_header: {
    status: 400,
    reason: 'missing_header',
    code: 'bad_request',
    message: (r) => `missing header: ${r.header}`,
    signatureFailure: true,
  },
  repeated_header: {
    status: 400,
    reason: 'repeated_header',
    code: 'bad_request',
    message: (r) => `repeated header: ${r.header}`,
    signatureFailure: true,
  },
  repeated_optional_header: { status: 400, reason: 'repeated_header', code: 'bad_request', message: 'repeated header' },
  event_id_headers_differ: {
    status: 400,
    reason: 'event_id_mismatch',
    code: 'event_id_mismatch',
    message: (r) => `${r.header} and ${r.alias} differ`,
  },
  malformed_retry_header: {
    status: 400,
    reason: 'malformed_retry_header',
    code: 'bad_request',
    message: (r) => `${r.header} must be a non-negative integer`,
  },
  malformed_timestamp: {
    status: 400,
    reason: 'malformed_timestamp',
    code: 'bad_request',
    message: (r) => `${r.header} must be ${r.forms}`,
    signatureFailure: true,
  },
  inflight_body_bytes: { ...UNAVAILABLE, reason: 'inflight_body_bytes', closeConnection: true, overload: true },
  // One client address holds its whole share of the budget: its own doing, so 429 rather than 503.
  client_body_bytes: {
    status: 429,
    reason: 'client_body_bytes',
    code: 'too_many_requests',
    retryAfter: true,
    closeConnection: true,
    overload: true,
  },
  // A body that stopped arriving, or arrives too slowly to finish in time (slowloris).
  body_idle_timeout: { ...REQUEST_TIMEOUT, reason: 'body_idle_timeout' },
  body_timeout: { ...REQUEST_TIMEOUT, reason: 'body_timeout' },

  unknown_source: { ...UNAUTHORIZED, reason: 'unknown_source' },
  signature_missing_header: { ...UNAUTHORIZED, reason: 'missing_header' },
  // Preflight refuses such a timestamp first (malformed_timestamp, 400); this row answers the same.
  signature_malformed_timestamp: { status: 400, reason: 'malformed_timestamp', code: 'bad_request', signatureFailure: true },
  signature_timestamp_out_of_window: { ...UNAUTHORIZED, reason: 'timestamp_out_of_window' },
  signature_malformed_signature: { ...UNAUTHORIZED, reason: 'malformed_signature' },
  signature_no_matching_signature: { ...UNAUTHORIZED, reason: 'no_matching_signature' },
  // Signed with a secret past its retireAfter only: the provider has not switched yet.
  signature_secret_retired: { ...UNAUTHORIZED, reason: 'secret_retired' },

  // Over the source's requests or bytes per second on this ingress; Retry-After says when a token is back.
  source_rate_limited: {
    status: 429,
    reason: 'source_rate_limited',
    code: 'source_rate_limited',
    message: (r) => `this source is over its ${r.limit} per second on this ingress; retry after ${r.retryAfterSeconds} s`,
    retryAfter: true,
  },

  // Not JSON, or not a structure anyone should read: 400. JSON that breaks the contract: 422.
  invalid_utf8: { status: 400, reason: 'invalid_utf8', code: 'invalid_utf8', message: (r) => r.message },
  invalid_json: { status: 400, reason: 'invalid_json', code: 'invalid_json', message: (r) => r.message },
  too_deep: { status: 400, reason: 'too_deep', code: 'too_deep', message: (r) => r.message },
  forbidden_key: { status: 400, reason: 'forbidden_key', code: 'forbidden_key', message: (r) => r.message },
  invalid_string: { status: 422, reason: 'invalid_string', code: 'invalid_string', message: (r) => r.message },
  unknown_event_version: { status: 422, reason: 'unknown_event_version', code: 'unknown_event_version', message: (r) => r.message },
  invalid_envelope: { status: 422, reason: 'invalid_envelope', code: 'invalid_envelope', message: (r) => r.message },
  invalid_data: { status: 422, reason: 'invalid_data', code: 'invalid_data', message: (r) => r.message },
  event_id_mismatch: {
    status: 400,
    reason: 'event_id_mismatch',
    code: 'event_id_mismatch',
    message: (r) => `${r.header} must equal event_id`,
  },
  event_type_mismatch: {
    status: 400,
    reason: 'event_type_mismatch',
    code: 'event_type_mismatch',
    message: (r) => `${r.header} must equal event_type`,
  },
  idempotency_key_mismatch: {
    status: 400,
    reason: 'idempotency_key_mismatch',
    code: 'idempotency_key_mismatch',
    message: (r) => `${r.header} must equal idempotency_key`,
  },
  resource_type_not_allowed: {
    status: 422,
    reason: 'resource_type_not_allowed',
    code: 'resource_type_not_allowed',
    message: (r) => `resource type "${r.resourceType}" is not one this source publishes (${r.allowed.join(', ')})`,
  },
  tenant_not_allowed: { status: 403, reason: 'tenant_not_allowed', code: 'forbidden', message: 'source may not publish for this tenant' },
  strict_schema: { status: 422, reason: 'strict_schema', code: 'invalid_data', message: (r) => r.problem },
  // Nothing was stored: the same event id, dated by a correct clock, is accepted.
  occurred_at_in_future: {
    status: 422,
    reason: 'occurred_at_in_future',
    code: 'occurred_at_in_future',
    message: (r) => `${describeFutureOccurredAt(r.ahead, 'the receiving clock')}: correct the sending clock, then send the event again`,
    eventRefusal: true,
  },

  // A record the broker refuses for its size would be refused again: 413, no Retry-After.
  record_too_large: { status: 413, reason: 'record_too_large', code: 'payload_too_large' },
  broker_unavailable: { ...UNAVAILABLE, reason: 'broker_unavailable' },
  ack_timeout: { ...UNAVAILABLE, reason: 'ack_timeout' },

  // Answered by express (its own JSON headers), from this row.
  not_found: { status: 404, reason: 'not_found', code: 'not_found' },
  internal_error: { status: 500, reason: 'internal_error', code: 'internal_error' },
};
