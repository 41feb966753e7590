// Read-only SQL of the CLI, against the schema in shared/db/migrations.

export const SELECT_RESOURCE_STATE = `
  SELECT version, deleted, data, last_event_id, created_at, updated_at
  FROM resource_state
  WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`;

/** Newest first: by when the bridge received it, then by version for events received together. */
export const SELECT_RESOURCE_EVENTS = `
  SELECT event_id, event_type, status, resource_version, reason, attempts, last_error, duplicate_of,
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

export const SELECT_APPLIED_RECORDS = `
  SELECT event_id, created_at, published_at
  FROM applied_outbox
  WHERE key = $1
  ORDER BY id DESC
  LIMIT 50`;

export const SELECT_INBOX_STATUSES = `
  SELECT event_id, status, reason, attempts, body_sha256, updated_at
  FROM inbox_events
  WHERE event_id = ANY($1::text[])`;
