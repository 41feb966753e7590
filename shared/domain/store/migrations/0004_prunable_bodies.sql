-- Retention prunes raw bodies (inbox_events.payload, inbox_anomalies.payload) after a while but
-- keeps the rows: they are the deduplication record. A pruned inbox row keeps the fingerprint of
-- its envelope (shared/domain/contract/fingerprint.ts), computed by the pruner from the body it
-- removes, so a redelivery with other bytes can still be told from an anomaly.
ALTER TABLE inbox_events ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE inbox_events ADD COLUMN fingerprint text;
ALTER TABLE inbox_anomalies ALTER COLUMN payload DROP NOT NULL;
