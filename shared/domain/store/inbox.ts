// inbox_events: every event the bridge has seen, keyed by (tenant_id, event_id). The apply path
// writes and settles rows (chunk.ts); the failure path records what it could not apply yet (here);
// retention prunes bodies and settled rows (retention.ts).
import { columns, int4, int8, statement, text, timestamptz, unnestOf, valuesOf, type RowOf } from './columns.ts';
import type { Queryable } from './session.ts';
import type { ResourceRef } from './state.ts';

/** Only a row still pending (or never written) is touched: an applied row is history, not a failure.
 * Returns how many rows were updated (0: none pending with this body). */
export async function recordPendingFailure(
  client: Queryable,
  args: {
    tenant_id: string;
    event_id: string;
    body_sha256: string;
    status: string;
    reason: string;
    attempts: number;
    last_error: string;
    /** The failed delivery's W3C trace id (null: it carried none; the row keeps the one it has). */
    trace_id: string | null;
  },
): Promise<number> {
  const result = await client.query({
    text: `
      UPDATE inbox_events SET
        status = $1, reason = $2, attempts = GREATEST(attempts, $3), last_error = $4,
        trace_id = coalesce($8, trace_id), updated_at = now()
      WHERE tenant_id = $5 AND event_id = $6 AND body_sha256 = $7 AND status IN ('received', 'retrying', 'dead_lettered')
      RETURNING event_id`,
    values: [args.status, args.reason, args.attempts, args.last_error, args.tenant_id, args.event_id, args.body_sha256, args.trace_id],
  });
  return result.rowCount ?? 0;
}

const FAILED_EVENT = columns({
  event_id: text,
  idempotency_key: text,
  tenant_id: text,
  resource_type: text,
  resource_id: text,
  resource_version: int8,
  event_type: text,
  status: text,
  reason: text,
  attempts: int4,
  last_error: text,
  body_sha256: text,
  payload: text,
  source_topic: text,
  source_partition: int4,
  source_offset: int8,
  occurred_at: timestamptz,
  received_at: timestamptz,
  delivery_attempt: int4,
  /** The W3C trace id the failed record's traceparent carries; null: none. */
  trace_id: text,
});
export type FailedEventRow = RowOf<typeof FAILED_EVENT>;

// A row with this tenant's event_id already there means the apply path will decide this event
// (a duplicate, or an anomaly); nothing to record here.
const INSERT_FAILED_EVENT = statement(
  { row: valuesOf(FAILED_EVENT) },
  ({ row }) => `
  INSERT INTO inbox_events (${row.names})
  VALUES (${row.placeholders})
  ON CONFLICT (tenant_id, event_id) DO NOTHING`,
);

/** A failed event never written before (the failure path's first attempt), with its body. */
export async function insertFailedEvent(client: Queryable, row: FailedEventRow): Promise<void> {
  await client.query({ text: INSERT_FAILED_EVENT.text, values: INSERT_FAILED_EVENT.values({ row: [row] }) });
}

const EVENT_KEYS = columns({ tenant_id: text, event_id: text });
export type EventKey = RowOf<typeof EVENT_KEYS>;

export interface InboxStatusRow {
  tenant_id: string;
  event_id: string;
  status: string;
  reason: string | null;
  attempts: number;
  body_sha256: string;
  updated_at: Date;
}

const SELECT_STATUSES = statement(
  { k: unnestOf(EVENT_KEYS, 'k') },
  ({ k }) => `
  SELECT i.tenant_id, i.event_id, i.status, i.reason, i.attempts, i.body_sha256, i.updated_at
  FROM ${k.from}
  JOIN inbox_events AS i ON i.tenant_id = k.tenant_id AND i.event_id = k.event_id`,
);

/** The inbox rows of some events (those without a row are left out). */
export async function selectInboxStatuses(client: Queryable, keys: readonly EventKey[]): Promise<InboxStatusRow[]> {
  const { rows } = await client.query<InboxStatusRow>({ text: SELECT_STATUSES.text, values: SELECT_STATUSES.values({ k: keys }) });
  return rows;
}

export interface InboxPayloadRow {
  tenant_id: string;
  event_id: string;
  payload: string | null;
  /** Kept by retention when it pruned the payload. */
  fingerprint: string | null;
}

const SELECT_PAYLOADS = statement(
  { k: unnestOf(EVENT_KEYS, 'k') },
  ({ k }) => `
  SELECT i.tenant_id, i.event_id, i.payload, i.fingerprint
  FROM ${k.from}
  JOIN inbox_events AS i ON i.tenant_id = k.tenant_id AND i.event_id = k.event_id`,
);

/** The stored bodies of some inbox rows (or, once retention pruned a body, its fingerprint). */
export async function selectInboxPayloads(client: Queryable, keys: readonly EventKey[]): Promise<InboxPayloadRow[]> {
  const { rows } = await client.query<InboxPayloadRow>({ text: SELECT_PAYLOADS.text, values: SELECT_PAYLOADS.values({ k: keys }) });
  return rows;
}

export interface ResourceEventRow {
  event_id: string;
  event_type: string | null;
  status: string;
  /** bigint, as text. */
  resource_version: string | null;
  reason: string | null;
  attempts: number;
  delivery_attempt: number | null;
  last_error: string | null;
  duplicate_of: string | null;
  idempotency_key: string | null;
  body_sha256: string;
  source_topic: string | null;
  source_partition: number | null;
  source_offset: string | null;
  occurred_at: Date | null;
  received_at: Date | null;
  first_seen_at: Date;
  updated_at: Date;
  /** The webhook source it came through, or `reconcile` for a pulled snapshot (null on rows older than migration 0007). */
  source: string | null;
  /** Why it was pulled, for a reconciled snapshot (gap, unseen, quarantine, operator). */
  reconcile_trigger: string | null;
  /** The W3C trace id of the delivery that set the status (null: no trace, or a row older than migration 0009). */
  trace_id: string | null;
}

/** Every event seen for one resource, newest first: by when the bridge received it, then by
 * version for events received together (bridge trace). */
export async function selectResourceEvents(client: Queryable, resource: ResourceRef): Promise<ResourceEventRow[]> {
  const { rows } = await client.query<ResourceEventRow>({
    text: `
      SELECT event_id, event_type, status, resource_version, reason, attempts, delivery_attempt, last_error, duplicate_of,
             idempotency_key, body_sha256, source_topic, source_partition, source_offset,
             occurred_at, received_at, first_seen_at, updated_at, source, reconcile_trigger, trace_id
      FROM inbox_events
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3
      ORDER BY COALESCE(received_at, first_seen_at) DESC, resource_version DESC NULLS LAST, event_id`,
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows;
}
