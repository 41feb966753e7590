// One resource's state, events, anomalies and applied records, shaped for reading: `bridge trace`
// and the console's resource page.
import { resourceKey } from '#domain/contract/index.ts';
import { traceIdOf } from '#domain/contract/event-headers.ts';
import { formatMicros } from '#domain/contract/occurred-at.ts';
import { selectResourceAnomalies } from '#domain/store/anomalies.ts';
import { selectResourceEvents } from '#domain/store/inbox.ts';
import { selectAppliedRecords } from '#domain/store/outbox.ts';
import type { Queryable } from '#domain/store/session.ts';
import { selectResourceState, type ResourceRef } from '#domain/store/state.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export type ResourceTrace = Awaited<ReturnType<typeof resourceTrace>>;

/** Everything the database knows about one resource; `known` is false when it has no state, events or anomalies. */
export async function resourceTrace(pool: Queryable, resource: ResourceRef) {
  const { tenant_id: tenant, resource_type: type, resource_id: id } = resource;
  const key = resourceKey({ tenant_id: tenant, resource: { type, id, version: 0 } });
  const [s, events, anomalies, applied] = await Promise.all([
    selectResourceState(pool, resource),
    selectResourceEvents(pool, resource),
    selectResourceAnomalies(pool, resource),
    selectAppliedRecords(pool, key),
  ]);
  const stateOut = s
    ? {
        version: s.version === null ? null : Number(s.version),
        /** What orders this resource's events, recorded with its state: its version, or occurred_at. */
        ordered_by: s.ordered_by,
        /** The occurred_at that ordered the state, to the microsecond (ordered by occurred_at only). */
        last_occurred_at: s.ordered_by === 'occurred_at' && s.last_occurred_us !== null ? formatMicros(BigInt(s.last_occurred_us)) : null,
        deleted: s.deleted,
        data: s.data,
        last_event_id: s.last_event_id,
        created_at: iso(s.created_at),
        updated_at: iso(s.updated_at),
      }
    : null;
  const eventsOut = events.map((e) => ({
    event_id: e.event_id as string,
    event_type: e.event_type as string | null,
    status: e.status as string,
    version: e.resource_version === null ? null : Number(e.resource_version),
    reason: e.reason as string | null,
    attempts: e.attempts as number,
    delivery_attempt: e.delivery_attempt === null ? null : Number(e.delivery_attempt),
    last_error: e.last_error as string | null,
    duplicate_of: e.duplicate_of as string | null,
    idempotency_key: e.idempotency_key as string | null,
    body_sha256: e.body_sha256 as string,
    kafka:
      e.source_topic === null
        ? null
        : { topic: e.source_topic as string, partition: e.source_partition as number, offset: String(e.source_offset) },
    occurred_at: iso(e.occurred_at),
    received_at: iso(e.received_at),
    first_seen_at: iso(e.first_seen_at),
    updated_at: iso(e.updated_at),
    source: e.source as string | null,
    reconcile_trigger: e.reconcile_trigger as string | null,
    /** W3C trace id of the delivery that set the status (null: it carried and started no trace). */
    trace_id: e.trace_id as string | null,
  }));
  const anomaliesOut = anomalies.map((a) => ({
    event_id: a.event_id as string,
    kind: a.kind as string,
    status: a.status as string,
    version: a.resource_version === null ? null : Number(a.resource_version),
    body_sha256: a.body_sha256 as string,
    original_body_sha256: a.original_body_sha256 as string | null,
    kafka:
      a.source_topic === null
        ? null
        : { topic: a.source_topic as string, partition: a.source_partition as number, offset: String(a.source_offset) },
    detected_at: iso(a.detected_at),
    trace_id: a.trace_id as string | null,
  }));
  const appliedOut = applied.map((a) => ({
    event_id: a.event_id,
    created_at: iso(a.created_at),
    published_at: iso(a.published_at),
    /** The trace the record carries on (its traceparent header) for downstream consumers. */
    trace_id: traceIdOf(a.traceparent) ?? null,
  }));

  return {
    known: s !== undefined || events.length > 0 || anomalies.length > 0,
    resource: { tenant_id: tenant, type, id, key },
    state: stateOut,
    events: eventsOut,
    anomalies: anomaliesOut,
    applied: appliedOut,
  };
}
