import { headerText, type RecordHeaders } from '#plumbing/kafka/headers.ts';
import type { ReceivedEnvelope } from './envelope.ts';

// Headers of a record on the events topic: written by the ingress, read by the worker and the
// CLI. The raw body stays untouched; what the ingress learnt about the delivery travels here.
// The one place they are named, encoded and decoded (the retry chain's own headers live in
// shared/domain/failures/retry-headers.ts).
export const EVENT_HEADERS = {
  eventId: 'event-id',
  source: 'source',
  receivedAt: 'received-at',
  secretId: 'secret-id',
  bodySha256: 'body-sha256',
  eventType: 'event-type',
  idempotencyKey: 'idempotency-key',
  /** The provider's attempt number (X-Webhook-Retry), when it sent one. */
  deliveryAttempt: 'delivery-attempt',
  /**
   * `occurred_at` when the source orders this resource type by occurred_at (absent: by version).
   * Travels with the record so the worker, the retry chain and a reprocess order it as the
   * ingress accepted it, whatever the sources file says later.
   */
  orderedBy: 'ordered-by',
  /**
   * Seconds: the bound on occurred_at's lead over received-at the ingress accepted the record under,
   * written only when the source's bound is not the default. The worker judges the record by it, so a
   * replay is refused or applied as the ingress decided, whatever the worker knows of the source.
   */
  maxFutureSkew: 'max-future-skew',
  /** Why a reconciliation pulled this snapshot (gap, unseen, quarantine, operator); only on records from `reconcile`. */
  reconcileTrigger: 'reconcile-trigger',
  /** W3C trace context (the names the W3C propagator and @opentelemetry/instrumentation-kafkajs use);
   * only when tracing is on. The retry chain and the DLQ forward them with the other headers. */
  traceparent: 'traceparent',
  tracestate: 'tracestate',
} as const;

/** The `source` header of a snapshot the bridge pulled from a provider's API instead of receiving it. */
export const RECONCILE_SOURCE = 'reconcile';

/** What the ingress learnt about one delivery. */
export interface EventRecordHeaders {
  eventId: string;
  /** The source (provider) id the request was verified for. */
  source: string;
  receivedAt: Date;
  /** Which of the source's secrets verified the signature (none for a pulled snapshot). */
  secretId?: string | undefined;
  bodySha256: string;
  eventType: string;
  idempotencyKey?: string | undefined;
  deliveryAttempt?: number | undefined;
  reconcileTrigger?: string | undefined;
  /** Set only for time ordering; version ordering is the default and writes no header. */
  orderedBy?: 'occurred_at' | undefined;
  /** Set only when the source's bound is not the default (DEFAULT_MAX_FUTURE_SKEW_SECONDS). */
  maxFutureSkewSeconds?: number | undefined;
  traceparent?: string | undefined;
  tracestate?: string | undefined;
}

export function encodeEventHeaders(h: EventRecordHeaders): Record<string, string> {
  const headers: Record<string, string> = {
    [EVENT_HEADERS.eventId]: h.eventId,
    [EVENT_HEADERS.source]: h.source,
    [EVENT_HEADERS.receivedAt]: h.receivedAt.toISOString(),
    // Kept in its place (the ingress's header order is part of its tests); a pulled snapshot has none.
    ...(h.secretId === undefined ? {} : { [EVENT_HEADERS.secretId]: h.secretId }),
    [EVENT_HEADERS.bodySha256]: h.bodySha256,
    [EVENT_HEADERS.eventType]: h.eventType,
  };
  if (h.idempotencyKey !== undefined) headers[EVENT_HEADERS.idempotencyKey] = h.idempotencyKey;
  if (h.reconcileTrigger !== undefined) headers[EVENT_HEADERS.reconcileTrigger] = h.reconcileTrigger;
  if (h.deliveryAttempt !== undefined) headers[EVENT_HEADERS.deliveryAttempt] = String(h.deliveryAttempt);
  if (h.orderedBy !== undefined) headers[EVENT_HEADERS.orderedBy] = h.orderedBy;
  if (h.maxFutureSkewSeconds !== undefined) headers[EVENT_HEADERS.maxFutureSkew] = String(h.maxFutureSkewSeconds);
  if (h.traceparent !== undefined) headers[EVENT_HEADERS.traceparent] = h.traceparent;
  if (h.tracestate !== undefined) headers[EVENT_HEADERS.tracestate] = h.tracestate;
  return headers;
}

/**
 * The event headers of a consumed record, each one only when present and well-formed: records
 * written by an older ingress, by `bridge dlq replay` or by hand may lack any of them.
 */
export function decodeEventHeaders(headers: RecordHeaders | undefined): Partial<EventRecordHeaders> {
  const out: Partial<EventRecordHeaders> = {};
  const text = (name: string) => headerText(headers, name);
  const eventId = text(EVENT_HEADERS.eventId);
  if (eventId !== undefined) out.eventId = eventId;
  const source = text(EVENT_HEADERS.source);
  if (source !== undefined) out.source = source;
  const receivedAt = receivedAtHeader(headers);
  if (receivedAt !== undefined) out.receivedAt = receivedAt;
  const secretId = text(EVENT_HEADERS.secretId);
  if (secretId !== undefined) out.secretId = secretId;
  const bodySha256 = text(EVENT_HEADERS.bodySha256);
  if (bodySha256 !== undefined) out.bodySha256 = bodySha256;
  const eventType = text(EVENT_HEADERS.eventType);
  if (eventType !== undefined) out.eventType = eventType;
  const idempotencyKey = text(EVENT_HEADERS.idempotencyKey);
  if (idempotencyKey !== undefined) out.idempotencyKey = idempotencyKey;
  const attempt = deliveryAttemptHeader(headers);
  if (attempt !== undefined) out.deliveryAttempt = attempt;
  if (text(EVENT_HEADERS.orderedBy) === 'occurred_at') out.orderedBy = 'occurred_at';
  const maxFutureSkew = maxFutureSkewHeader(headers);
  if (maxFutureSkew !== undefined) out.maxFutureSkewSeconds = maxFutureSkew;
  const trigger = text(EVENT_HEADERS.reconcileTrigger);
  if (trigger !== undefined) out.reconcileTrigger = trigger;
  const { traceparent, tracestate } = traceContextHeaders(headers);
  if (traceparent !== undefined) out.traceparent = traceparent;
  if (tracestate !== undefined) out.tracestate = tracestate;
  return out;
}

// The two the apply path reads for every record, decoded on their own (the hot path).

/** `received-at`: an ISO time, or epoch milliseconds (older records and benchmarks write those). */
export function receivedAtHeader(headers: RecordHeaders | undefined): Date | undefined {
  const text = headerText(headers, EVENT_HEADERS.receivedAt);
  if (text === undefined) return undefined;
  const at = /^\d+$/.test(text) ? new Date(Number(text)) : new Date(text);
  return Number.isNaN(at.getTime()) ? undefined : at;
}

/** `delivery-attempt`: a non-negative integer, else undefined. */
export function deliveryAttemptHeader(headers: RecordHeaders | undefined): number | undefined {
  const text = headerText(headers, EVENT_HEADERS.deliveryAttempt);
  return text !== undefined && /^\d{1,9}$/.test(text) ? Number(text) : undefined;
}

/**
 * What orders this event: `occurred_at` when the ingress said so (the source orders its type by
 * time) or when the envelope has no version (only such a source lets one through); else version.
 */
export function eventOrdering(headers: RecordHeaders | undefined, envelope: ReceivedEnvelope): 'version' | 'occurred_at' {
  if (envelope.resource.version === undefined) return 'occurred_at';
  return headerText(headers, EVENT_HEADERS.orderedBy) === 'occurred_at' ? 'occurred_at' : 'version';
}

/** `max-future-skew`: a positive whole number of seconds, else undefined. */
export function maxFutureSkewHeader(headers: RecordHeaders | undefined): number | undefined {
  const text = headerText(headers, EVENT_HEADERS.maxFutureSkew);
  return text !== undefined && /^[1-9]\d{0,8}$/.test(text) ? Number(text) : undefined;
}

/** `source`: the webhook source the ingress verified, or `reconcile`. */
export function sourceHeader(headers: RecordHeaders | undefined): string | undefined {
  return headerText(headers, EVENT_HEADERS.source);
}

/** `reconcile-trigger`, on records the reconciler published. */
export function reconcileTriggerHeader(headers: RecordHeaders | undefined): string | undefined {
  return headerText(headers, EVENT_HEADERS.reconcileTrigger);
}

// W3C Trace Context: version-trace_id-parent_id-flags, lowercase hex. Version ff is invalid, and
// version 00 has exactly these four fields; an all-zero trace or parent id is invalid.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_PARENT_ID = '0'.repeat(16);

/** The trace id (32 hex) a W3C `traceparent` names; undefined when there is none or it is invalid. */
export function traceIdOf(traceparent: string | null | undefined): string | undefined {
  if (traceparent === null || traceparent === undefined) return undefined;
  const match = TRACEPARENT.exec(traceparent.trim());
  if (!match) return undefined;
  const [, version, traceId, parentId, rest] = match;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  return traceId === ZERO_TRACE_ID || parentId === ZERO_PARENT_ID ? undefined : traceId;
}

/** The trace id of the record's `traceparent` header (the trace the ingress started or continued), whether tracing is on here or not. */
export function traceIdHeader(headers: RecordHeaders | undefined): string | undefined {
  return traceIdOf(headerText(headers, EVENT_HEADERS.traceparent));
}

/** `traceparent` / `tracestate`: the W3C trace context a record continues (read only when tracing is on). */
export function traceContextHeaders(headers: RecordHeaders | undefined): { traceparent?: string; tracestate?: string } {
  const traceparent = headerText(headers, EVENT_HEADERS.traceparent);
  if (traceparent === undefined) return {};
  const tracestate = headerText(headers, EVENT_HEADERS.tracestate);
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}
