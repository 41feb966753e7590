import type { KafkaMessage } from '#plumbing/kafka/types.ts';
import { tenantScopedKey } from '#domain/apply/index.ts';
import { parseEvent, type ReceivedEnvelope } from '#domain/contract/index.ts';
import { EVENT_HEADERS } from '#domain/contract/event-headers.ts';
import { decodeDeadLetterInfo, DLQ_HEADERS, originalHeaders, type DeadLetterInfo } from '#domain/failures/index.ts';
import { headerText, type RecordHeaders } from '#plumbing/kafka/headers.ts';

/** Added to a replayed record: where in the DLQ it came from (kept if it is dead-lettered again). */
export const REPLAYED_FROM_HEADER = 'replayed-from';

export interface DlqEntry {
  partition: number;
  offset: string;
  /** Broker timestamp of the DLQ record, ms. */
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: RecordHeaders;
  eventId: string | null;
  /** From the body; the inbox is keyed by (tenant, event id). */
  tenantId: string | null;
  /** The body's envelope, when it is a valid event. */
  envelope: ReceivedEnvelope | null;
  info: DeadLetterInfo | null;
  /** Why the DLQ headers could not be decoded, when they could not. */
  problem: string | null;
}

interface BodyIdentity {
  eventId: string | null;
  tenantId: string | null;
  envelope: ReceivedEnvelope | null;
}

function bodyIdentity(value: Buffer | null): BodyIdentity {
  const none = { eventId: null, tenantId: null, envelope: null };
  if (!value) return none;
  const parsed = parseEvent(value);
  if (parsed.ok) return { eventId: parsed.envelope.event_id, tenantId: parsed.envelope.tenant_id, envelope: parsed.envelope };
  // Not a valid event (that may be why it was dead-lettered): take what the JSON still says.
  try {
    const json = JSON.parse(value.toString('utf8')) as { event_id?: unknown; tenant_id?: unknown };
    return {
      eventId: typeof json.event_id === 'string' ? json.event_id : null,
      tenantId: typeof json.tenant_id === 'string' ? json.tenant_id : null,
      envelope: null,
    };
  } catch {
    return none;
  }
}

/** The entry's inbox row key, when the body names a tenant and an event id. */
export function inboxKeyOf(entry: Pick<DlqEntry, 'tenantId' | 'eventId'>): string | undefined {
  return entry.tenantId !== null && entry.eventId !== null ? tenantScopedKey(entry.tenantId, entry.eventId) : undefined;
}

export function toDlqEntry(partition: number, message: KafkaMessage): DlqEntry {
  const headers = message.headers ?? {};
  const decoded = decodeDeadLetterInfo(headers);
  const body = bodyIdentity(message.value);
  return {
    partition,
    offset: message.offset,
    timestamp: Number(message.timestamp),
    key: message.key,
    value: message.value,
    headers,
    // The header is what the ingress vouched for; the body is the fallback for records from elsewhere.
    eventId: headerText(headers, EVENT_HEADERS.eventId) ?? body.eventId,
    tenantId: body.tenantId,
    envelope: body.envelope,
    info: decoded.ok ? decoded.info : null,
    problem: decoded.ok ? null : decoded.problem,
  };
}

export function deadLetteredAt(entry: DlqEntry): number {
  return entry.info ? entry.info.deadLetteredAt.getTime() : entry.timestamp;
}

export function entryReason(entry: DlqEntry): string {
  return entry.info?.reason ?? headerText(entry.headers, DLQ_HEADERS.reason) ?? 'unknown';
}

export interface DlqFilter {
  since?: number;
  reason?: string;
}

export function filterEntries(entries: DlqEntry[], filter: DlqFilter): DlqEntry[] {
  return entries.filter(
    (e) =>
      (filter.since === undefined || deadLetteredAt(e) >= filter.since) &&
      (filter.reason === undefined || entryReason(e) === filter.reason),
  );
}

export type DlqRef = { kind: 'coordinates'; partition: number; offset: string } | { kind: 'event'; eventId: string };

export function parseDlqRef(text: string): DlqRef {
  const m = /^(\d+):(\d+)$/.exec(text);
  return m ? { kind: 'coordinates', partition: Number(m[1]), offset: m[2]! } : { kind: 'event', eventId: text };
}

export function matchesRef(entry: DlqEntry, ref: DlqRef): boolean {
  return ref.kind === 'coordinates' ? entry.partition === ref.partition && entry.offset === ref.offset : entry.eventId === ref.eventId;
}

/**
 * One record per event, the most recently dead-lettered: an event dead-lettered twice is replayed once.
 * Records without an event id are kept one by one.
 */
export function latestPerEvent(entries: DlqEntry[]): DlqEntry[] {
  const byEvent = new Map<string, DlqEntry>();
  const anonymous: DlqEntry[] = [];
  for (const e of entries) {
    if (e.eventId === null) {
      anonymous.push(e);
      continue;
    }
    // Two tenants may share an event id: they are two events.
    const key = inboxKeyOf(e) ?? e.eventId;
    const seen = byEvent.get(key);
    if (!seen || deadLetteredAt(e) >= deadLetteredAt(seen)) byEvent.set(key, e);
  }
  return [...byEvent.values(), ...anonymous].sort((a, b) => deadLetteredAt(a) - deadLetteredAt(b));
}

/** What goes back to the events topic: the original key, body and ingress headers, no failure bookkeeping. */
export function replayMessage(entry: DlqEntry, dlqTopic: string): { key: Buffer | null; value: Buffer | null; headers: RecordHeaders } {
  return {
    key: entry.key,
    value: entry.value,
    headers: { ...originalHeaders(entry.headers), [REPLAYED_FROM_HEADER]: `${dlqTopic}:${entry.partition}:${entry.offset}` },
  };
}

export function headersAsText(headers: RecordHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(headers)) out[name] = headerText(headers, name) ?? '';
  return out;
}
