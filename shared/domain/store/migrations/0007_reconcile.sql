-- Reconciliation (shared/domain/reconcile): a snapshot the bridge pulled from a provider's API goes
-- through the apply path like a webhook. The inbox now records where each event came from (the
-- webhook source the ingress verified, or 'reconcile') and, for a pulled one, what triggered the
-- pull (gap, unseen, quarantine, operator). Both are nullable: rows from before stay as they are.
-- Adding nullable columns without a default only changes the catalogue (no table rewrite).
ALTER TABLE inbox_events ADD COLUMN source text;
ALTER TABLE inbox_events ADD COLUMN reconcile_trigger text;
