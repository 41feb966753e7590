import type { AppliedRecord } from '#domain/contract/index.ts';
import { EVENT_HEADERS } from '#domain/contract/event-headers.ts';
import type { ParsedEvent } from './types.ts';

export const APPLIED_HEADER_EVENT_ID = 'event-id';
export const APPLIED_HEADER_SOURCE_TOPIC = 'source-topic';
export const APPLIED_HEADER_SOURCE_PARTITION = 'source-partition';
export const APPLIED_HEADER_SOURCE_OFFSET = 'source-offset';

export function buildAppliedRecord(event: ParsedEvent, appliedAt: Date): AppliedRecord {
  const { envelope } = event;
  const { type, id, version } = envelope.resource;
  return {
    event_id: envelope.event_id,
    tenant_id: envelope.tenant_id,
    resource: version === undefined ? { type, id } : { type, id, version },
    ...(event.orderedBy === 'occurred_at' ? { ordered_by: 'occurred_at' as const } : {}),
    action: event.action,
    data: event.action === 'delete' ? null : (envelope.data ?? {}),
    occurred_at: envelope.occurred_at,
    applied_at: appliedAt.toISOString(),
  };
}

/**
 * The bytes of JSON.stringify(buildAppliedRecord(event, appliedAt)), from a snapshot the caller
 * has already serialised (`dataJson`, null for a delete): the apply path serialises each
 * snapshot once for both the state row and the applied record.
 */
export function serializeAppliedRecord(event: ParsedEvent, appliedAtIso: string, dataJson: string | null): string {
  const { envelope } = event;
  const { resource } = envelope;
  return (
    `{"event_id":${JSON.stringify(envelope.event_id)},"tenant_id":${JSON.stringify(envelope.tenant_id)},` +
    `"resource":{"type":${JSON.stringify(resource.type)},"id":${JSON.stringify(resource.id)}` +
    (resource.version === undefined ? '},' : `,"version":${JSON.stringify(resource.version)}},`) +
    (event.orderedBy === 'occurred_at' ? '"ordered_by":"occurred_at",' : '') +
    `"action":${JSON.stringify(event.action)},"data":${dataJson ?? 'null'},` +
    `"occurred_at":${JSON.stringify(envelope.occurred_at)},"applied_at":${JSON.stringify(appliedAtIso)}}`
  );
}

/** `source` of the CloudEvents on the applied topic: one per tenant, so (source, id) is unique. */
export const CLOUDEVENTS_SOURCE_PREFIX = '/theme-bridge/tenants/';
const PAST_TENSE: Readonly<Record<string, string>> = { upsert: 'upserted', delete: 'deleted' };

/**
 * The CloudEvents attributes of an applied record, in the Kafka binding's binary content mode: the
 * value stays our JSON applied record, and `ce_*` headers make each record an event any
 * CloudEvents SDK reads without knowing our schema. Read from the stored key and the exact bytes
 * serializeAppliedRecord wrote, without parsing the whole record: the action comes before `data`
 * and the two times close the record; JSON escaping keeps those markers out of any string value.
 * Undefined for a value of another shape (then the record goes out without them).
 */
export function cloudEventHeaders(key: string, eventId: string, payload: string): Record<string, string> | undefined {
  const [tenant, type] = key.split('/', 2);
  const action = /,"action":"(upsert|delete)",/.exec(payload)?.[1];
  const occurredAt = /,"occurred_at":"([^"\\]*)","applied_at":"[^"\\]*"\}$/.exec(payload)?.[1];
  if (!tenant || !type || action === undefined || occurredAt === undefined) return undefined;
  return {
    ce_specversion: '1.0',
    ce_id: eventId,
    ce_source: `${CLOUDEVENTS_SOURCE_PREFIX}${tenant}`,
    ce_type: `${type}.${PAST_TENSE[action]}`,
    ce_subject: key,
    ce_time: occurredAt,
    'content-type': 'application/json',
  };
}

/**
 * Headers of an applied record: the event id, where the event was consumed from, its CloudEvents
 * attributes, and the apply span's W3C trace context when the apply was traced (stored with the
 * row, so a republished batch carries the same headers).
 */
export function appliedHeaders(source: {
  eventId: string;
  topic: string;
  partition: number;
  offset: string;
  key: string;
  payload: string;
  traceparent?: string | null;
  tracestate?: string | null;
}): Record<string, string> {
  const headers: Record<string, string> = {
    [APPLIED_HEADER_EVENT_ID]: source.eventId,
    [APPLIED_HEADER_SOURCE_TOPIC]: source.topic,
    [APPLIED_HEADER_SOURCE_PARTITION]: String(source.partition),
    [APPLIED_HEADER_SOURCE_OFFSET]: source.offset,
    ...cloudEventHeaders(source.key, source.eventId, source.payload),
  };
  if (source.traceparent) {
    headers[EVENT_HEADERS.traceparent] = source.traceparent;
    if (source.tracestate) headers[EVENT_HEADERS.tracestate] = source.tracestate;
  }
  return headers;
}
