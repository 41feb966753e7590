import type { EventAction } from '#domain/contract/index.ts';
import type { ParsedEvent } from './types.ts';

/** The record downstream teams read from the applied topic (value, JSON). */
export interface AppliedRecord {
  event_id: string;
  tenant_id: string;
  resource: { type: string; id: string; version: number };
  action: EventAction;
  /** The full snapshot; null for a delete (the tombstone keeps its version). */
  data: Record<string, unknown> | null;
  occurred_at: string;
  applied_at: string;
}

export const APPLIED_HEADER_EVENT_ID = 'event-id';
export const APPLIED_HEADER_SOURCE_TOPIC = 'source-topic';
export const APPLIED_HEADER_SOURCE_PARTITION = 'source-partition';
export const APPLIED_HEADER_SOURCE_OFFSET = 'source-offset';

export function buildAppliedRecord(event: ParsedEvent, appliedAt: Date): AppliedRecord {
  const { envelope } = event;
  return {
    event_id: envelope.event_id,
    tenant_id: envelope.tenant_id,
    resource: { type: envelope.resource.type, id: envelope.resource.id, version: envelope.resource.version },
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
    `"resource":{"type":${JSON.stringify(resource.type)},"id":${JSON.stringify(resource.id)},"version":${JSON.stringify(resource.version)}},` +
    `"action":${JSON.stringify(event.action)},"data":${dataJson ?? 'null'},` +
    `"occurred_at":${JSON.stringify(envelope.occurred_at)},"applied_at":${JSON.stringify(appliedAtIso)}}`
  );
}

/** Headers of an applied record: the event id and where the event was consumed from. */
export function appliedHeaders(source: { eventId: string; topic: string; partition: number; offset: string }): Record<string, string> {
  return {
    [APPLIED_HEADER_EVENT_ID]: source.eventId,
    [APPLIED_HEADER_SOURCE_TOPIC]: source.topic,
    [APPLIED_HEADER_SOURCE_PARTITION]: String(source.partition),
    [APPLIED_HEADER_SOURCE_OFFSET]: source.offset,
  };
}
