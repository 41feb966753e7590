-- Reconciliation (shared/domain/reconcile): a pull the worker owes is recorded here until it is
-- answered, so a failed pull, one dropped from a full queue or one lost with its process is
-- retried after a restart, and what an operator must look at (a 404 without a version, an answer
-- refused) stays visible. One row per resource: a new trigger for it replaces the old one.
-- status: pending (owed, not answered yet; next_attempt_at is when it counts as lost), retrying
-- (failed transiently; next_attempt_at from the retry chain's backoff), gone (404/410 without a
-- version), failed (refused answer, or retries exhausted). An applied or stale answer deletes it.
-- A new table: existing rows elsewhere are untouched.
CREATE TABLE reconcile_pulls (
  tenant_id text NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  source text NOT NULL,
  trigger text NOT NULL,
  seen_version bigint,
  status text NOT NULL CHECK (status IN ('pending', 'retrying', 'gone', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  last_outcome text,
  last_reason text,
  last_status integer,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, resource_type, resource_id)
);
CREATE INDEX reconcile_pulls_due ON reconcile_pulls (next_attempt_at) WHERE status IN ('pending', 'retrying');
