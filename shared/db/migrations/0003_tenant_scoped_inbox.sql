-- Providers as they really send (see shared/contract/fingerprint.ts):
-- 1. Deduplication is per tenant: two providers (tenants) may well use the same event ids, so the
--    inbox is keyed by (tenant_id, event_id). Every inbox row comes from a parsed envelope, so
--    tenant_id is always set.
-- 2. A duplicate is told from an anomaly by a fingerprint of the canonical envelope without the
--    delivery-only fields, not by the raw bytes: a redelivery with another delivery_attempt or other
--    whitespace is a duplicate. Rows from before this migration have no fingerprint; the worker
--    computes it from their payload when it meets them again.
-- 3. The provider's attempt number (X-Webhook-Retry, or the body's delivery_attempt) is recorded.
-- 4. An idempotency key is claimed only by the event that applied: a stale, retrying or
--    dead-lettered event no longer blocks the corrected republish of the same business effect.

ALTER TABLE inbox_events ALTER COLUMN tenant_id SET NOT NULL;
ALTER TABLE inbox_events DROP CONSTRAINT inbox_events_pkey;
ALTER TABLE inbox_events ADD PRIMARY KEY (tenant_id, event_id);
ALTER TABLE inbox_events
  ADD COLUMN fingerprint text,
  ADD COLUMN delivery_attempt integer;

DROP INDEX inbox_events_idempotency_key;
CREATE UNIQUE INDEX inbox_events_idempotency_key
  ON inbox_events (tenant_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL AND status = 'applied';

ALTER TABLE inbox_anomalies ADD COLUMN fingerprint text;
ALTER TABLE inbox_anomalies DROP CONSTRAINT inbox_anomalies_event_id_body_sha256_key;
-- One anomaly row per distinct content seen under a tenant's event id (old rows: NULL, never conflicting).
CREATE UNIQUE INDEX inbox_anomalies_event ON inbox_anomalies (tenant_id, event_id, fingerprint);
