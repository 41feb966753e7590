import type { EventAction } from '../contract/index.ts';
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

export function appliedHeaders(event: ParsedEvent): Record<string, string> {
  return {
    [APPLIED_HEADER_EVENT_ID]: event.envelope.event_id,
    [APPLIED_HEADER_SOURCE_TOPIC]: event.record.topic,
    [APPLIED_HEADER_SOURCE_PARTITION]: String(event.record.partition),
    [APPLIED_HEADER_SOURCE_OFFSET]: event.record.offset,
  };
}
