-- migrate:concurrently
-- The operator console's reads (services/console), on the table the worker writes to: each search
-- form and the overview's time window is an index scan, never a read of inbox_events. Search by
-- event id alone, by idempotency key alone (the unique index covers applied rows only), by bare
-- resource id and by trace id; the overview's last hour and day by the time an event was first seen.
--
-- Built concurrently: applies go on while they build.

CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_event_id ON inbox_events (event_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_any_idempotency_key ON inbox_events (idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_resource_id ON inbox_events (resource_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_trace_id ON inbox_events (trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_seen_at ON inbox_events ((COALESCE(received_at, first_seen_at)));
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_anomalies_detected_at ON inbox_anomalies (detected_at);
