-- Ordering by occurred_at (seed 002's fallback for providers without an increasing version per
-- resource, chosen per source and resource type in the sources file). A row applied that way
-- keeps the occurred_at that ordered it in last_occurred_at, and its version only if the event
-- carried one. Rows from before were all ordered by version: they keep their version and get a
-- NULL last_occurred_at, which is what a version-ordered row has. Dropping NOT NULL and adding a
-- nullable column without a default only change the catalogue; the CHECK reads the table once.
ALTER TABLE resource_state ALTER COLUMN version DROP NOT NULL;
ALTER TABLE resource_state ADD COLUMN last_occurred_at timestamptz;
ALTER TABLE resource_state ADD CONSTRAINT resource_state_ordered
  CHECK (version IS NOT NULL OR last_occurred_at IS NOT NULL);
