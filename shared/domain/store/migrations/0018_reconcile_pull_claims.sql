-- reconcile_pulls: who holds a pull owed, and which trigger it answers.
-- generation: counts the triggers recorded for the row; an answer settles the row only if no
-- trigger came after the pull read it (a trigger during a pull is answered by a pull after it).
-- claim: the token of the worker's job that holds the row; it renews next_attempt_at while the job
-- waits or runs, so another worker takes the row only once that worker stopped renewing, and a
-- job whose claim was taken over writes nothing. NULL: nobody holds it (due, or for an operator).
-- Existing rows get generation 1 and no claim: the next poll takes them as before.
ALTER TABLE reconcile_pulls
  ADD COLUMN generation bigint NOT NULL DEFAULT 1,
  ADD COLUMN claim uuid;
