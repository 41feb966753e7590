-- migrate:concurrently
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
--
-- A busy outbox must not be rewritten under an exclusive lock: the new columns are added without
-- a default first (catalog only), rows from before the migration are backfilled in batches that
-- commit as they go, the position index is built concurrently, and NOT NULL is proven by a
-- constraint validated without blocking writes. Rows from before the migration get tx 2: real
-- transaction ids start at 3, so they sort first, in id order.

ALTER TABLE applied_outbox
  ADD COLUMN IF NOT EXISTS tx xid8,
  ADD COLUMN IF NOT EXISTS source_topic text,
  ADD COLUMN IF NOT EXISTS source_partition integer,
  ADD COLUMN IF NOT EXISTS source_offset bigint;
-- Rows written from now on carry their transaction's id (a default changes only the catalog).
ALTER TABLE applied_outbox ALTER COLUMN tx SET DEFAULT pg_current_xact_id();
DO $$
DECLARE
  upto bigint;
  last bigint := 0;
BEGIN
  SELECT COALESCE(max(id), 0) INTO upto FROM applied_outbox;
  WHILE last < upto LOOP
    -- Rows written before this migration keep their headers as columns.
    UPDATE applied_outbox SET
      tx = '2'::xid8,
      source_topic = headers ->> 'source-topic',
      source_partition = (headers ->> 'source-partition')::integer,
      source_offset = (headers ->> 'source-offset')::bigint
    WHERE id > last AND id <= last + 5000 AND tx IS NULL;
    last := last + 5000;
    COMMIT;
  END LOOP;
END $$;
DO $$
BEGIN
  ALTER TABLE applied_outbox ADD CONSTRAINT applied_outbox_tx_set CHECK (tx IS NOT NULL) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
ALTER TABLE applied_outbox VALIDATE CONSTRAINT applied_outbox_tx_set;
CREATE INDEX CONCURRENTLY IF NOT EXISTS applied_outbox_position ON applied_outbox (tx, id);

-- migrate:then-in-transaction
ALTER TABLE applied_outbox ALTER COLUMN tx SET NOT NULL;
ALTER TABLE applied_outbox DROP CONSTRAINT applied_outbox_tx_set;

CREATE TABLE applied_outbox_batches (
  id            bigserial PRIMARY KEY,
  -- The last row of the batch in (tx, id) order: everything up to it is published.
  last_tx       xid8 NOT NULL,
  last_id       bigint NOT NULL,
  records       integer NOT NULL,
  published_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX applied_outbox_batches_position ON applied_outbox_batches (last_tx, last_id);

-- Rows already published become one batch. Every row from before the migration has tx 2, so the
-- cursor is an id: the last one before the first unpublished row (rows after it that were already
-- published are published again, byte-identical, which an at-least-once subscriber tolerates).
INSERT INTO applied_outbox_batches (last_tx, last_id, records, published_at)
SELECT '2'::xid8,
       COALESCE((SELECT min(id) - 1 FROM applied_outbox WHERE published_at IS NULL), max(id)),
       count(*), max(published_at)
FROM applied_outbox
WHERE published_at IS NOT NULL
HAVING count(*) > 0;

DROP INDEX applied_outbox_unpublished;
ALTER TABLE applied_outbox DROP COLUMN headers, DROP COLUMN published_at;

-- Each applied event rewrites its resource's row; free space on the page lets Postgres do that as
-- a heap-only update (no new primary-key entry).
ALTER TABLE resource_state SET (fillfactor = 80);
