-- Every table an apply transaction writes now carries the Kafka partition its row came from:
-- inbox_events, applied_outbox and inbox_anomalies had source_partition already; resource_state
-- gets it here. The bridge's topics all have the events topic's partition count and every record
-- is keyed by its resource, so it is the resource's partition on every topic (murmur2 of the key),
-- and every row of one resource carries the same value. It is the column a store split by
-- partition shards on (docs/scaling.md): on N Postgres clusters chosen by Kafka partition, or on
-- Citus as the distribution column. Nullable without a default: only the catalogue changes (no
-- table rewrite); rows from before get it at their resource's next apply.
ALTER TABLE resource_state ADD COLUMN source_partition integer;
