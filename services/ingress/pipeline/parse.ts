import { eventAction, parseEvent, resourceKey, type ParseEventOptions } from '#domain/contract/index.ts';
import { DEFAULT_MAX_FUTURE_SKEW_SECONDS, occurredAtTooFarAhead } from '#domain/contract/occurred-at-bound.ts';
import { orderingOf } from '#domain/sources/index.ts';
import type { MatchedEvent } from './matched-event.ts';
import { OPTIONAL_HEADERS, type Delivery } from './preflight.ts';
import type { Rejection } from './rejections.ts';
import type { VerifiedSignature } from './verify.ts';

/**
 * Parses the envelope, then checks it against the headers it was sent with and against what the
 * source may publish (resource types, tenants, strict schemas). Headers and body must agree:
 * otherwise the provider's record and ours name different events.
 */
export function parseAndMatch(
  delivery: Delivery,
  verified: VerifiedSignature,
  rawBody: Buffer,
  receivedAt: Date,
  parseOptions: ParseEventOptions,
): MatchedEvent | Rejection {
  const parsed = parseEvent(rawBody, parseOptions);
  if (!parsed.ok) return { kind: parsed.code, message: parsed.message, bodySha256: parsed.bodySha256 };
  const envelope = parsed.envelope;
  const source = delivery.source;
  const resourceType = envelope.resource.type;
  const typeAllowed = source.resourceTypes.includes(resourceType);
  const ordering = orderingOf(source, resourceType);
  const event: MatchedEvent = {
    eventId: envelope.event_id,
    source: source.id,
    receivedAt,
    secretId: verified.secretId,
    bodySha256: parsed.bodySha256,
    eventType: envelope.event_type,
    idempotencyKey: envelope.idempotency_key,
    deliveryAttempt: delivery.deliveryAttempt,
    tenant: envelope.tenant_id,
    resource: resourceKey(envelope),
    typeLabel: typeAllowed ? envelope.event_type : undefined,
    ...(ordering === 'occurred_at' ? { orderedBy: 'occurred_at' as const } : {}),
    // The bound it was accepted under, so the worker judges a replay of it alike; the default needs no header.
    ...(source.maxFutureSkewSeconds !== undefined && source.maxFutureSkewSeconds !== DEFAULT_MAX_FUTURE_SKEW_SECONDS
      ? { maxFutureSkewSeconds: source.maxFutureSkewSeconds }
      : {}),
  };
  if (envelope.event_id !== delivery.id) return { kind: 'event_id_mismatch', header: delivery.names.id, event };
  if (delivery.eventType !== undefined && delivery.eventType !== envelope.event_type) {
    return { kind: 'event_type_mismatch', header: OPTIONAL_HEADERS.eventType, event };
  }
  if (delivery.idempotencyKey !== undefined && delivery.idempotencyKey !== envelope.idempotency_key) {
    return { kind: 'idempotency_key_mismatch', header: OPTIONAL_HEADERS.idempotencyKey, event };
  }
  if (!typeAllowed) return { kind: 'resource_type_not_allowed', resourceType, allowed: source.resourceTypes, event };
  if (!source.tenants.includes(envelope.tenant_id)) return { kind: 'tenant_not_allowed', event };
  // Every type, whatever its ordering: a time from the future freezes a time-ordered resource, and
  // a type ordered by version today may be switched to occurred_at later.
  const bound = source.maxFutureSkewSeconds ?? DEFAULT_MAX_FUTURE_SKEW_SECONDS;
  const ahead = occurredAtTooFarAhead(envelope.occurred_at, receivedAt, bound);
  if (ahead !== undefined) return { kind: 'occurred_at_in_future', ahead, event };
  // The version orders the event unless the source chose occurred_at for this type (seed 002).
  if (envelope.resource.version === undefined && ordering === 'version') {
    return {
      kind: 'invalid_envelope',
      message: `resource.version: required (source orders "${resourceType}" by version)`,
      bodySha256: parsed.bodySha256,
    };
  }
  const strict = source.strictSchemas?.[resourceType];
  if (strict !== undefined && eventAction(envelope) !== 'delete') {
    const problem = strict.check(envelope.data);
    if (problem !== undefined) return { kind: 'strict_schema', problem, event };
  }
  return event;
}
