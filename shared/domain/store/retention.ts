// Every statement of retention (shared/domain/retention/pruner.ts; see migration 0005 for the
// indexes each one walks). A batch is one short transaction: beginRetentionBatch, one statement
// (two for inbox bodies), COMMIT. The texts are exported for EXPLAIN in the tests.
import { columns, statement, text, unnestOf, type RowOf } from './columns.ts';
import { RELAY_CURSOR, type OutboxPosition } from './outbox.ts';
import type { Queryable } from './session.ts';

/** Settled inbox rows: nothing will change them again, so their bodies and then the rows may go. */
export const SETTLED_INBOX_STATUSES = ['applied', 'stale', 'duplicate', 'duplicate_version'] as const;
/** Anomalies that went to the DLQ or were resolved. */
export const SETTLED_ANOMALY_STATUSES = ['dead_lettered', 'resolved'] as const;

const settledInbox = `status IN (${SETTLED_INBOX_STATUSES.map((s) => `'${s}'`).join(', ')})`;
const settledAnomaly = `status IN (${SETTLED_ANOMALY_STATUSES.map((s) => `'${s}'`).join(', ')})`;

/** One run of the retention lock per database; the two-key form never collides with the one-key
 * advisory locks of the apply path (resource keys), the relay and the migrator. */
export async function tryRetentionLock(client: Queryable): Promise<boolean> {
  const { rows } = await client.query<{ locked: boolean }>({ text: 'SELECT pg_try_advisory_lock(7261, 5) AS locked' });
  return rows[0]?.locked === true;
}

export async function releaseRetentionLock(client: Queryable): Promise<void> {
  await client.query({ text: 'SELECT pg_advisory_unlock(7261, 5)' });
}

/** A batch waits at most lockTimeoutMs for a lock (rows are taken with SKIP LOCKED; this bounds
 * waiting on a table lock, e.g. a migration) and runs at most statementTimeoutMs. */
export async function beginRetentionBatch(client: Queryable, limits: { lockTimeoutMs: number; statementTimeoutMs: number }): Promise<void> {
  await client.query({
    text: `BEGIN; SET LOCAL lock_timeout = ${Math.trunc(limits.lockTimeoutMs)}; SET LOCAL statement_timeout = ${Math.trunc(limits.statementTimeoutMs)}; SET LOCAL max_parallel_workers_per_gather = 0`,
  });
}

/** The dry run's counts, all from one snapshot. */
export async function beginRetentionPlan(client: Queryable): Promise<void> {
  await client.query({ text: 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' });
}

// --- inbox_events -------------------------------------------------------------------------------

/**
 * The oldest settled rows with a body ($1 cutoff, $2 rows), locked. Their bodies are returned only
 * while the running total of body sizes stays within $3 bytes (always for the first row): the rest
 * stay locked until COMMIT and are left for the next batch. octet_length reads a TOASTed body's
 * size from its pointer, without fetching it.
 */
export const SELECT_INBOX_BODIES = `
  SELECT tenant_id, event_id, CASE WHEN running - bytes < $3 THEN payload END AS payload
  FROM (
    SELECT tenant_id, event_id, payload, bytes,
      sum(bytes) OVER (ORDER BY updated_at, tenant_id, event_id ROWS UNBOUNDED PRECEDING) AS running
    FROM (
      SELECT tenant_id, event_id, payload, updated_at, octet_length(payload)::bigint AS bytes
      FROM inbox_events
      WHERE payload IS NOT NULL AND ${settledInbox} AND updated_at < $1
      ORDER BY updated_at
      LIMIT $2
      FOR UPDATE SKIP LOCKED
    ) AS locked
  ) AS sized`;

/** payload null: locked, but beyond the batch's byte budget. */
export async function selectInboxBodies(
  client: Queryable,
  args: { olderThan: Date; rows: number; bytes: number },
): Promise<Array<{ tenant_id: string; event_id: string; payload: string | null }>> {
  const { rows } = await client.query<{ tenant_id: string; event_id: string; payload: string | null }>({
    text: SELECT_INBOX_BODIES,
    values: [args.olderThan, args.rows, args.bytes],
  });
  return rows;
}

const PRUNED_BODIES = columns({ tenant_id: text, event_id: text, fingerprint: text });
export type PrunedBody = RowOf<typeof PRUNED_BODIES>;

const PRUNE_INBOX_BODIES_STATEMENT = statement(
  { u: unnestOf(PRUNED_BODIES, 'u') },
  ({ u }) => `
  UPDATE inbox_events AS i SET payload = NULL, fingerprint = u.fingerprint
  FROM ${u.from}
  WHERE i.tenant_id = u.tenant_id AND i.event_id = u.event_id AND i.payload IS NOT NULL`,
);
export const PRUNE_INBOX_BODIES = PRUNE_INBOX_BODIES_STATEMENT.text;

/** The body goes, its envelope fingerprint (computed from it, or NULL) stays, in one statement. */
export async function pruneInboxBodies(client: Queryable, rows: readonly PrunedBody[]): Promise<number> {
  const result = await client.query({ text: PRUNE_INBOX_BODIES, values: PRUNE_INBOX_BODIES_STATEMENT.values({ u: rows }) });
  return result.rowCount ?? 0;
}

/** Settled rows whose body is gone, last updated before $1; $2 rows. The rows are locked by the
 * subquery, so their ctids cannot change before the DELETE: a TID scan, whatever the table's size. */
export const DELETE_INBOX_ROWS = `
  DELETE FROM inbox_events
  WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM inbox_events
    WHERE payload IS NULL AND ${settledInbox} AND updated_at < $1
    ORDER BY updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED))`;

export async function deleteInboxRows(client: Queryable, args: { olderThan: Date; rows: number }): Promise<number> {
  return (await client.query({ text: DELETE_INBOX_ROWS, values: [args.olderThan, args.rows] })).rowCount ?? 0;
}

// --- inbox_anomalies ----------------------------------------------------------------------------

export const PRUNE_ANOMALY_BODIES = `
  UPDATE inbox_anomalies SET payload = NULL
  WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM inbox_anomalies
    WHERE payload IS NOT NULL AND ${settledAnomaly} AND updated_at < $1
    ORDER BY updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED))`;

export async function pruneAnomalyBodies(client: Queryable, args: { olderThan: Date; rows: number }): Promise<number> {
  return (await client.query({ text: PRUNE_ANOMALY_BODIES, values: [args.olderThan, args.rows] })).rowCount ?? 0;
}

export const DELETE_ANOMALY_ROWS = `
  DELETE FROM inbox_anomalies
  WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM inbox_anomalies
    WHERE payload IS NULL AND ${settledAnomaly} AND updated_at < $1
    ORDER BY updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED))`;

export async function deleteAnomalyRows(client: Queryable, args: { olderThan: Date; rows: number }): Promise<number> {
  return (await client.query({ text: DELETE_ANOMALY_ROWS, values: [args.olderThan, args.rows] })).rowCount ?? 0;
}

// --- applied_outbox -----------------------------------------------------------------------------

/**
 * How far the outbox may be pruned: the position of the newest batch published before $1. Every row
 * up to it was published (and so created) before the cutoff. No row: nothing is old enough.
 * A batch beyond the cursor is from before a restore into another cluster (the cursor was
 * re-baselined below it): its position means nothing here, so it is no bound.
 */
export const SELECT_OUTBOX_BOUND = `
  SELECT b.last_tx::text AS tx, b.last_id::text AS id FROM applied_outbox_batches AS b, (${RELAY_CURSOR}) AS c
  WHERE b.published_at < $1 AND (b.last_tx, b.last_id) <= (c.tx, c.id)
  ORDER BY b.published_at DESC, b.id DESC
  LIMIT 1`;

export async function selectOutboxBound(client: Queryable, olderThan: Date): Promise<OutboxPosition | undefined> {
  return (await client.query<OutboxPosition>({ text: SELECT_OUTBOX_BOUND, values: [olderThan] })).rows[0];
}

/**
 * One step of the walk in (tx, id) order: the next $5 rows after ($1, $2) up to the bound ($3, $4)
 * and never past the relay's cursor (rows after it are unpublished). Of those, the rows that a newer
 * row of the same key supersedes are deleted: the newest row per key stays, so trace still shows
 * each resource's last applied record. Returns how far the walk got and how many rows went.
 * Rows are not locked while walked (the rows kept would be written again on every run); nothing
 * else updates or deletes outbox rows, and the DELETE waits at most lock_timeout. By primary key
 * (= ANY of an array): an index scan, whatever the table's size. OFFSET 0 keeps the EXISTS a probe
 * of applied_outbox_key per row: without it the planner turns it into a hash semi-join that reads
 * the whole table for every batch.
 */
export const DELETE_OUTBOX_ROWS = `
  WITH span AS (
    SELECT o.id, o.tx, o.key FROM applied_outbox AS o, (${RELAY_CURSOR}) AS c
    WHERE (o.tx, o.id) > ($1::xid8, $2::bigint) AND (o.tx, o.id) <= ($3::xid8, $4::bigint)
      AND (o.tx, o.id) <= (c.tx, c.id)
    ORDER BY o.tx, o.id
    LIMIT $5
  ), deleted AS (
    DELETE FROM applied_outbox
    WHERE id = ANY (ARRAY(
      SELECT s.id FROM span AS s
      WHERE EXISTS (SELECT 1 FROM applied_outbox AS n WHERE n.key = s.key AND n.id > s.id OFFSET 0)))
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM span)::int AS scanned,
    (SELECT count(*) FROM deleted)::int AS deleted,
    last.tx::text AS last_tx, last.id::text AS last_id
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (SELECT tx, id FROM span ORDER BY tx DESC, id DESC LIMIT 1) AS last ON true`;

export interface OutboxWalkStep {
  scanned: number;
  deleted: number;
  /** Where the walk got (null: nothing walked). */
  last_tx: string | null;
  last_id: string | null;
}

export async function deleteOutboxRows(
  client: Queryable,
  args: { after: OutboxPosition; bound: OutboxPosition; rows: number },
): Promise<OutboxWalkStep> {
  const { rows } = await client.query<OutboxWalkStep>({
    text: DELETE_OUTBOX_ROWS,
    values: [args.after.tx, args.after.id, args.bound.tx, args.bound.id, args.rows],
  });
  return rows[0]!;
}

/** Relay batches published before $1, oldest first, $2 rows; never the newest (the cursor). */
export const DELETE_OUTBOX_BATCHES = `
  DELETE FROM applied_outbox_batches
  WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM applied_outbox_batches
    WHERE published_at < $1 AND id < (SELECT max(id) FROM applied_outbox_batches)
    ORDER BY published_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED))`;

export async function deleteOutboxBatches(client: Queryable, args: { olderThan: Date; rows: number }): Promise<number> {
  return (await client.query({ text: DELETE_OUTBOX_BATCHES, values: [args.olderThan, args.rows] })).rowCount ?? 0;
}

// --- dry run: what a run would do now -----------------------------------------------------------

async function count(client: Queryable, text: string, values: unknown[]): Promise<number> {
  return Number((await client.query<{ n: string }>({ text, values })).rows[0]!.n);
}

export function countInboxBodies(client: Queryable, olderThan: Date): Promise<number> {
  return count(client, `SELECT count(*)::bigint AS n FROM inbox_events WHERE payload IS NOT NULL AND ${settledInbox} AND updated_at < $1`, [
    olderThan,
  ]);
}

/** Rows a run deletes: those already without a body, and those whose body it prunes first. */
export function countInboxRows(client: Queryable, olderThan: Date): Promise<number> {
  return count(
    client,
    `SELECT (SELECT count(*) FROM inbox_events WHERE payload IS NULL AND ${settledInbox} AND updated_at < $1)
          + (SELECT count(*) FROM inbox_events WHERE payload IS NOT NULL AND ${settledInbox} AND updated_at < $1) AS n`,
    [olderThan],
  );
}

export function countAnomalyBodies(client: Queryable, olderThan: Date): Promise<number> {
  return count(
    client,
    `SELECT count(*)::bigint AS n FROM inbox_anomalies WHERE payload IS NOT NULL AND ${settledAnomaly} AND updated_at < $1`,
    [olderThan],
  );
}

export function countAnomalyRows(client: Queryable, olderThan: Date): Promise<number> {
  return count(
    client,
    `SELECT (SELECT count(*) FROM inbox_anomalies WHERE payload IS NULL AND ${settledAnomaly} AND updated_at < $1)
          + (SELECT count(*) FROM inbox_anomalies WHERE payload IS NOT NULL AND ${settledAnomaly} AND updated_at < $1) AS n`,
    [olderThan],
  );
}

/** Rows up to the bound (selectOutboxBound) that a newer row of the same key supersedes. */
export function countOutboxRows(client: Queryable, bound: OutboxPosition): Promise<number> {
  return count(
    client,
    `SELECT count(*)::bigint AS n FROM applied_outbox AS o, (${RELAY_CURSOR}) AS c
     WHERE (o.tx, o.id) <= ($1::xid8, $2::bigint) AND (o.tx, o.id) <= (c.tx, c.id)
       AND EXISTS (SELECT 1 FROM applied_outbox AS n WHERE n.key = o.key AND n.id > o.id)`,
    [bound.tx, bound.id],
  );
}

export function countOutboxBatches(client: Queryable, olderThan: Date): Promise<number> {
  return count(
    client,
    `SELECT count(*)::bigint AS n FROM applied_outbox_batches
     WHERE published_at < $1 AND id < (SELECT max(id) FROM applied_outbox_batches)`,
    [olderThan],
  );
}
