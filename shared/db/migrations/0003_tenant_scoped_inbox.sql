-- Providers as they really send:
-- 1. Deduplication is per tenant: two providers (tenants) may well use the same event ids, so the
--    inbox is keyed by (tenant_id, event_id). Every inbox row comes from a parsed envelope, so
--    tenant_id is always set.
-- 2. The provider's attempt number (X-Webhook-Retry, or the body's delivery_attempt) is recorded.
-- 3. An idempotency key is claimed only by the event that applied: a stale, retrying or
--    dead-lettered event no longer blocks the corrected republish of the same business effect.
-- (A redelivery with other whitespace or another delivery_attempt is told from an anomaly by a
-- fingerprint of the canonical envelope, computed from the stored payload only when the same id
-- comes again with other bytes: shared/contract/fingerprint.ts. Nothing to store for it.)

ALTER TABLE inbox_events ALTER COLUMN tenant_id SET NOT NULL;
ALTER TABLE inbox_events DROP CONSTRAINT inbox_events_pkey;
ALTER TABLE inbox_events ADD PRIMARY KEY (tenant_id, event_id);
ALTER TABLE inbox_events ADD COLUMN delivery_attempt integer;

DROP INDEX inbox_events_idempotency_key;
CREATE UNIQUE INDEX inbox_events_idempotency_key
  ON inbox_events (tenant_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL AND status = 'applied';

-- One anomaly row per distinct body seen under a tenant's event id.
ALTER TABLE inbox_anomalies DROP CONSTRAINT inbox_anomalies_event_id_body_sha256_key;
ALTER TABLE inbox_anomalies ADD CONSTRAINT inbox_anomalies_event UNIQUE (tenant_id, event_id, body_sha256);
