-- The relay's cursor (tx, id) is only meaningful on the cluster whose transaction ids it holds.
-- Each published batch now records that cluster (pg_control_system().system_identifier), so a
-- dump and restore into another cluster (ids restart far below the cursor) is noticed and the
-- cursor re-baselined (services/worker/relay/) instead of silently stopping the relay.
ALTER TABLE applied_outbox_batches ADD COLUMN cluster_id text;
