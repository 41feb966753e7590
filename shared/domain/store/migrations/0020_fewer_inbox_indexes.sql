-- migrate:concurrently
-- Two fewer index entries for every inbox row, which the apply path writes once per event: each
-- index maintained on insert costs Postgres CPU on the hot path (`bench/worker/pg-cpu.ts` prices
-- them with BENCH_PG_DROP_INDEXES). Two pairs served the same lookups:
-- - the key (tenant_id, event_id) and event_id alone (operator search by event id): the key turns
--   around to (event_id, tenant_id), which serves both. ON CONFLICT (tenant_id, event_id) infers it
--   whatever the column order.
-- - (tenant_id, resource_type, resource_id, resource_version) (a resource's deliveries in version
--   order) and resource_id alone (operator search by bare resource id): one index led by
--   resource_id serves both, equality on the first three columns then version order.
-- Built concurrently (writes go on); the key swap at the end is a short transaction of catalog
-- changes, as in 0003.

CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_event_tenant ON inbox_events (event_id, tenant_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_resource_versions
  ON inbox_events (resource_id, tenant_id, resource_type, resource_version);
DROP INDEX CONCURRENTLY IF EXISTS inbox_events_event_id;
DROP INDEX CONCURRENTLY IF EXISTS inbox_events_resource_id;
DROP INDEX CONCURRENTLY IF EXISTS inbox_events_resource;

-- migrate:then-in-transaction
ALTER TABLE inbox_events DROP CONSTRAINT inbox_events_pkey;
ALTER TABLE inbox_events ADD CONSTRAINT inbox_events_pkey PRIMARY KEY USING INDEX inbox_events_event_tenant;
