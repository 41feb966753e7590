// Read-only SQL of the CLI, against the schema in shared/plumbing/db/migrations.

export const SELECT_RESOURCE_STATE = `
  SELECT version, deleted, data, last_event_id, created_at, updated_at
  FROM resource_state
  WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`;

/** Newest first: by when the bridge received it, then by version for events received together. */
export const SELECT_RESOURCE_EVENTS = `
  SELECT event_id, event_type, status, resource_version, reason, attempts, delivery_attempt, last_error, duplicate_of,
         idempotency_key, body_sha256, source_topic, source_partition, source_offset,
         occurred_at, received_at, first_seen_at, updated_at
  FROM inbox_events
  WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3
  ORDER BY COALESCE(received_at, first_seen_at) DESC, resource_version DESC NULLS LAST, event_id`;

export const SELECT_RESOURCE_ANOMALIES = `
  SELECT event_id, kind, status, resource_version, body_sha256, original_body_sha256,
         source_topic, source_partition, source_offset, detected_at
  FROM inbox_anomalies
  WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3
  ORDER BY detected_at DESC, id DESC`;

/** published_at: when the relay's batch covering the row was published (NULL: not yet). */
export const SELECT_APPLIED_RECORDS = `
  SELECT o.event_id, o.created_at, b.published_at
  FROM applied_outbox AS o
  LEFT JOIN LATERAL (
    SELECT published_at FROM applied_outbox_batches
    WHERE (last_tx, last_id) >= (o.tx, o.id)
    ORDER BY last_tx, last_id
    LIMIT 1
  ) AS b ON true
  WHERE o.key = $1
  ORDER BY o.id DESC
  LIMIT 50`;

/** By (tenant_id, event_id) pairs: $1 tenants, $2 event ids. */
export const SELECT_INBOX_STATUSES = `
  SELECT i.tenant_id, i.event_id, i.status, i.reason, i.attempts, i.body_sha256, i.updated_at
  FROM unnest($1::text[], $2::text[]) AS k(tenant_id, event_id)
  JOIN inbox_events AS i ON i.tenant_id = k.tenant_id AND i.event_id = k.event_id`;

/** The stored bodies of some inbox rows (or, once retention pruned a body, its fingerprint), by
 * (tenant_id, event_id) pairs: $1 tenants, $2 event ids. */
export const SELECT_INBOX_PAYLOADS = `
  SELECT i.tenant_id, i.event_id, i.payload, i.fingerprint
  FROM unnest($1::text[], $2::text[]) AS k(tenant_id, event_id)
  JOIN inbox_events AS i ON i.tenant_id = k.tenant_id AND i.event_id = k.event_id`;
