-- Tracing (OpenTelemetry): the W3C trace id (32 hex) of the delivery behind each inbox row and
-- each anomaly, so `bridge trace` and the console show every event's trace whatever its outcome
-- (applied, stale, duplicate, retrying, dead-lettered, quarantined), not only the applied ones
-- whose outbox row keeps a traceparent (0008). NULL when the event carried and started no trace,
-- and on rows from before. Nullable columns without a default only change the catalogue (no
-- table rewrite); no index: the column is read per resource, never searched.
ALTER TABLE inbox_events ADD COLUMN trace_id text;
ALTER TABLE inbox_anomalies ADD COLUMN trace_id text;
