-- migrate:concurrently
-- Retention (shared/domain/retention): the worker prunes in small batches, oldest first. Every batch is an
-- index range scan that ends at its cutoff; none of them reads the table.
--
-- inbox_events: settled rows whose body is still there, and settled rows whose body is gone (these
-- are deleted after RETENTION_INBOX_DAYS). Rows a failure path left pending (received, retrying,
-- dead_lettered) and quarantined ones are in neither: an operator may still replay them.
-- The first index gets one entry per settled event (the apply path's only new cost); a row leaves
-- it when its body is pruned and enters the second one then, off the apply path.
--
-- Built concurrently (writes go on while they build; inbox_events is the busiest table).

CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_retention_body ON inbox_events (updated_at)
  WHERE payload IS NOT NULL AND status IN ('applied', 'stale', 'duplicate', 'duplicate_version');
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_events_retention_pruned ON inbox_events (updated_at)
  WHERE payload IS NULL AND status IN ('applied', 'stale', 'duplicate', 'duplicate_version');

-- inbox_anomalies: the same split for anomalies that went to the DLQ or were resolved.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_anomalies_retention_body ON inbox_anomalies (updated_at)
  WHERE payload IS NOT NULL AND status IN ('dead_lettered', 'resolved');
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_anomalies_retention_pruned ON inbox_anomalies (updated_at)
  WHERE payload IS NULL AND status IN ('dead_lettered', 'resolved');

-- applied_outbox_batches: old batches by age, and the newest batch published before the outbox
-- cutoff (everything up to its position is published and old). applied_outbox itself needs no new
-- index: it is walked on applied_outbox_position (tx, id) and probed on applied_outbox_key (key, id).
CREATE INDEX CONCURRENTLY IF NOT EXISTS applied_outbox_batches_published ON applied_outbox_batches (published_at, id);

-- migrate:then-in-transaction
-- Nothing else: the version record alone.
