-- migrate:concurrently
-- Providers as they really send:
-- 1. Deduplication is per tenant: two providers (tenants) may well use the same event ids, so the
--    inbox is keyed by (tenant_id, event_id). Every inbox row comes from a parsed envelope, so
--    tenant_id is always set.
-- 2. The provider's attempt number (X-Webhook-Retry, or the body's delivery_attempt) is recorded.
-- 3. An idempotency key is claimed only by the event that applied: a stale, retrying or
--    dead-lettered event no longer blocks the corrected republish of the same business effect.
-- (A redelivery with other whitespace or another delivery_attempt is told from an anomaly by a
-- fingerprint of the canonical envelope, computed from the stored payload only when the same id
-- comes again with other bytes: shared/domain/contract/fingerprint.ts.)
--
-- inbox_events is the busiest table: the new indexes are built concurrently (writes go on), the
-- NOT NULL is proven by a constraint validated without blocking writes, and the swap at the end
-- is a short transaction of catalog changes.

DO $$
BEGIN
  ALTER TABLE inbox_events ADD CONSTRAINT inbox_events_tenant_id_set CHECK (tenant_id IS NOT NULL) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
ALTER TABLE inbox_events VALIDATE CONSTRAINT inbox_events_tenant_id_set;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_tenant_event ON inbox_events (tenant_id, event_id);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_applied_idempotency_key
  ON inbox_events (tenant_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL AND status = 'applied';
-- One anomaly row per distinct body seen under a tenant's event id.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS inbox_anomalies_event ON inbox_anomalies (tenant_id, event_id, body_sha256);

-- migrate:then-in-transaction
-- The validated constraint proves NOT NULL: no table scan under the exclusive lock.
ALTER TABLE inbox_events ALTER COLUMN tenant_id SET NOT NULL;
ALTER TABLE inbox_events DROP CONSTRAINT inbox_events_tenant_id_set;
ALTER TABLE inbox_events DROP CONSTRAINT inbox_events_pkey;
ALTER TABLE inbox_events ADD CONSTRAINT inbox_events_pkey PRIMARY KEY USING INDEX inbox_events_tenant_event;
ALTER TABLE inbox_events ADD COLUMN delivery_attempt integer;
DROP INDEX inbox_events_idempotency_key;
ALTER INDEX inbox_events_applied_idempotency_key RENAME TO inbox_events_idempotency_key;
ALTER TABLE inbox_anomalies DROP CONSTRAINT inbox_anomalies_event_id_body_sha256_key;
