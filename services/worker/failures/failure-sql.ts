// Statements of the failure path. The apply path (shared/domain/apply) settles the rows written here
// when a later attempt of the same body succeeds.

export const SELECT_RESOURCE_VERSION = `
  SELECT version FROM resource_state
  WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`;

/** Only a row still pending (or never written) is touched: an applied row is history, not a failure. */
export const UPDATE_PENDING_INBOX_FAILURE = `
  UPDATE inbox_events SET
    status = $2, reason = $3, attempts = GREATEST(attempts, $4), last_error = $5, updated_at = now()
  WHERE tenant_id = $7 AND event_id = $1 AND body_sha256 = $6 AND status IN ('received', 'retrying', 'dead_lettered')
  RETURNING event_id`;

// A row with this tenant's event_id already there means the apply path will decide this event
// (a duplicate, or an anomaly); nothing to record here.
export const INSERT_INBOX_FAILURE = `
  INSERT INTO inbox_events (
    event_id, idempotency_key, tenant_id, resource_type, resource_id, resource_version, event_type,
    status, reason, attempts, last_error, body_sha256, payload, source_topic, source_partition, source_offset,
    occurred_at, received_at, delivery_attempt)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
  ON CONFLICT (tenant_id, event_id) DO NOTHING`;

export const MARK_ANOMALY_DEAD_LETTERED = `
  UPDATE inbox_anomalies SET status = 'dead_lettered', updated_at = now()
  WHERE tenant_id = $1 AND event_id = $2 AND body_sha256 = $3 AND status = 'quarantined'`;

/** A cheap round trip: the health probe of the outage controller. */
export const HEALTH_PROBE = 'SELECT 1';
