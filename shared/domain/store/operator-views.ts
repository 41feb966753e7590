// Read models for the operator console (services/console): outcome counts over time, search, the
// applied records of a resource with their bytes. Reads only; the statement timeout of the pool
// bounds them.
import { APPLIED_ROWS_WITH_PUBLISHED_AT } from './outbox.ts';
import type { Queryable } from './session.ts';

export interface OutcomeMinuteRow {
  /** The minute the event was received (start of the minute). */
  minute: Date;
  status: string;
  count: number;
}

// A quarantined delivery (an event id seen before with other content) has no inbox row of its own:
// the anomaly row is its record, so both views count those rows as `quarantined`.

/** Events received per minute over the last `minutes`, by their inbox status now. */
export async function selectOutcomesPerMinute(client: Queryable, minutes: number): Promise<OutcomeMinuteRow[]> {
  const { rows } = await client.query<OutcomeMinuteRow>({
    text: `
      SELECT minute, status, count(*)::int AS count
      FROM (
        SELECT date_trunc('minute', COALESCE(received_at, first_seen_at)) AS minute, status
        FROM inbox_events
        WHERE COALESCE(received_at, first_seen_at) >= date_trunc('minute', now()) - make_interval(mins => $1)
        UNION ALL
        SELECT date_trunc('minute', detected_at), 'quarantined'
        FROM inbox_anomalies
        WHERE detected_at >= date_trunc('minute', now()) - make_interval(mins => $1)
      ) AS seen
      GROUP BY 1, 2
      ORDER BY 1, 2`,
    values: [minutes],
  });
  return rows;
}

export interface StatusCountRow {
  status: string;
  count: number;
}

/**
 * Inbox rows first seen in the last `hours`, by status. A window, not all time: counting every row
 * would read the whole table the worker writes to; this is a range of inbox_events_seen_at.
 */
export async function selectStatusCounts(client: Queryable, hours: number): Promise<StatusCountRow[]> {
  const { rows } = await client.query<StatusCountRow>({
    text: `
      SELECT status, count(*)::int AS count
      FROM (
        SELECT status FROM inbox_events
        WHERE COALESCE(received_at, first_seen_at) >= now() - make_interval(hours => $1)
        UNION ALL
        SELECT 'quarantined' FROM inbox_anomalies WHERE detected_at >= now() - make_interval(hours => $1)
      ) AS seen
      GROUP BY status
      ORDER BY status`,
    values: [hours],
  });
  return rows;
}

export interface SearchHitRow {
  tenant_id: string;
  event_id: string;
  idempotency_key: string | null;
  resource_type: string | null;
  resource_id: string | null;
  resource_version: string | null;
  event_type: string | null;
  status: string;
  reason: string | null;
  received_at: Date | null;
  first_seen_at: Date;
  trace_id: string | null;
  /** What matched: event_id, idempotency_key, trace_id or resource. */
  matched: string;
}

/**
 * Inbox rows whose event id, idempotency key or trace id is `term`, or whose resource is `term` (its
 * id, or its key `<tenant>/<type>/<id>`); newest first, at most `limit`. Each form is an index
 * (migrations 0015 and 0020), combined by a bitmap OR: no scan of the table.
 */
export async function searchInbox(client: Queryable, term: string, limit: number): Promise<SearchHitRow[]> {
  const { rows } = await client.query<SearchHitRow>({
    text: `
      SELECT tenant_id, event_id, idempotency_key, resource_type, resource_id, resource_version, event_type, status, reason,
             received_at, first_seen_at, trace_id,
             CASE WHEN event_id = $1 THEN 'event_id' WHEN idempotency_key = $1 THEN 'idempotency_key'
                  WHEN trace_id = $1 THEN 'trace_id' ELSE 'resource' END AS matched
      FROM inbox_events
      WHERE event_id = $1 OR idempotency_key = $1 OR resource_id = $1 OR trace_id = $1
         OR (tenant_id = split_part($1, '/', 1) AND resource_type = split_part($1, '/', 2) AND resource_id = split_part($1, '/', 3))
      ORDER BY COALESCE(received_at, first_seen_at) DESC, event_id
      LIMIT $2`,
    values: [term, limit],
  });
  return rows;
}

export interface AppliedValueRow {
  id: string;
  event_id: string;
  /** The record's value on the applied topic, as published (JSON text). */
  payload: string;
  created_at: Date;
  published_at: Date | null;
  /** The apply span's W3C trace context, which the record carries (null: tracing was off). */
  traceparent: string | null;
}

/** A resource key's newest applied records with their values (what the relay publishes), newest first. */
export async function selectAppliedValues(client: Queryable, key: string, limit: number): Promise<AppliedValueRow[]> {
  const { rows } = await client.query<AppliedValueRow>({
    text: `
      SELECT o.id::text AS id, o.event_id, o.payload, o.created_at, b.published_at, o.traceparent
      FROM ${APPLIED_ROWS_WITH_PUBLISHED_AT}
      WHERE o.key = $1
      ORDER BY o.id DESC
      LIMIT $2`,
    values: [key, limit],
  });
  return rows;
}
