-- The relay no longer marks each published outbox row (an UPDATE rewrote every ~1 KB row and its
-- indexes: about a fifth of Postgres's work per event). It keeps a cursor instead, as PgQ does:
-- rows are read in (tx, id) order, where tx is the inserting transaction's id, and only from
-- transactions older than every transaction still running (pg_snapshot_xmin). Such rows can no
-- longer be joined by a commit that lands "behind" the cursor, so the cursor never skips a row.
-- Per resource key, (tx, id) follows apply order: an apply transaction takes the key's advisory
-- lock before its first write, so its tx is assigned after the previous holder committed.
--
-- Each published batch appends one row to applied_outbox_batches; the newest row is the cursor,
-- and trace reads when a record was published from the batch that covers it.

ALTER TABLE applied_outbox
  ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id(),
  ADD COLUMN source_topic text,
  ADD COLUMN source_partition integer,
  ADD COLUMN source_offset bigint;

-- Rows written before this migration keep their headers as columns.
UPDATE applied_outbox SET
  source_topic = headers ->> 'source-topic',
  source_partition = (headers ->> 'source-partition')::integer,
  source_offset = (headers ->> 'source-offset')::bigint;

CREATE TABLE applied_outbox_batches (
  id            bigserial PRIMARY KEY,
  -- The last row of the batch in (tx, id) order: everything up to it is published.
  last_tx       xid8 NOT NULL,
  last_id       bigint NOT NULL,
  records       integer NOT NULL,
  published_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX applied_outbox_batches_position ON applied_outbox_batches (last_tx, last_id);

-- Rows already published become one batch. Every existing row has this migration's tx, so the
-- cursor is an id: the last one before the first unpublished row (rows after it that were already
-- published are published again, byte-identical, which an at-least-once subscriber tolerates).
INSERT INTO applied_outbox_batches (last_tx, last_id, records, published_at)
SELECT pg_current_xact_id(),
       COALESCE((SELECT min(id) - 1 FROM applied_outbox WHERE published_at IS NULL), max(id)),
       count(*), max(published_at)
FROM applied_outbox
WHERE published_at IS NOT NULL
HAVING count(*) > 0;

DROP INDEX applied_outbox_unpublished;
ALTER TABLE applied_outbox DROP COLUMN headers, DROP COLUMN published_at;
CREATE INDEX applied_outbox_position ON applied_outbox (tx, id);

-- Each applied event rewrites its resource's row; free space on the page lets Postgres do that as
-- a heap-only update (no new primary-key entry).
ALTER TABLE resource_state SET (fillfactor = 80);
