-- Each resource lives by one ordering, recorded with its state: 'version' or 'occurred_at'. An
-- event of the other ordering never applies to the row (the apply path dead-letters it, and the
-- chunk statement's guard refuses the write); only `bridge ordering switch` changes it. Rows from
-- before were ordered by whatever wrote them last: a row with last_occurred_at was written under
-- time ordering. The default keeps rows written without the column (by hand, by older tests)
-- ordered by version, as every row was before time ordering existed; the apply path always
-- writes it. A constant default only changes the catalogue; the backfill rewrites the
-- time-ordered rows alone.
ALTER TABLE resource_state ADD COLUMN ordered_by text NOT NULL DEFAULT 'version'
  CONSTRAINT resource_state_ordered_by CHECK (ordered_by IN ('version', 'occurred_at'));
UPDATE resource_state SET ordered_by = 'occurred_at' WHERE last_occurred_at IS NOT NULL;
