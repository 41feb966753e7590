-- Tracing (OpenTelemetry): the apply span's W3C trace context travels with its applied record, so
-- the relay's publish span and the record's own traceparent header continue the trace that started
-- at the ingress. NULL when tracing is off. Nullable columns without a default only change the
-- catalogue (no table rewrite).
ALTER TABLE applied_outbox ADD COLUMN traceparent text;
ALTER TABLE applied_outbox ADD COLUMN tracestate text;
