// applied_outbox and applied_outbox_batches: the relay's rows, its cursor and its leadership lock
// (see migration 0002). The apply path writes the rows (chunk.ts); retention prunes them (retention.ts).
import type { Queryable } from './session.ts';

// Only one relay publishes at a time (per database): with the cursor, two relays would publish the
// same rows, and per-key order on the topic needs a single writer. The leader holds this advisory
// lock for its session (services/worker/relay/leadership.ts).
export const RELAY_LEADER_LOCK_KEY = 7261003412;

/** Takes the leader lock for this session; false while another session holds it. */
export async function tryRelayLeaderLock(client: Queryable, lockKey = RELAY_LEADER_LOCK_KEY): Promise<boolean> {
  const { rows } = await client.query<{ held: boolean }>({ text: 'SELECT pg_try_advisory_lock($1) AS held', values: [lockKey] });
  return rows[0]?.held === true;
}

export async function releaseRelayLeaderLock(client: Queryable, lockKey = RELAY_LEADER_LOCK_KEY): Promise<void> {
  await client.query({ text: 'SELECT pg_advisory_unlock($1)', values: [lockKey] });
}

/** The relay's cursor: the last published row in (tx, id) order; (0, 0) before the first batch. */
export const RELAY_CURSOR = `
  SELECT COALESCE(b.last_tx, '0'::xid8) AS tx, COALESCE(b.last_id, 0) AS id
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (SELECT last_tx, last_id FROM applied_outbox_batches ORDER BY id DESC LIMIT 1) AS b ON true`;

/** The cursor and the cluster it was recorded on. */
const RELAY_POSITION = `
  SELECT COALESCE(b.last_tx, '0'::xid8) AS tx, COALESCE(b.last_id, 0) AS id, b.cluster_id
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (SELECT last_tx, last_id, cluster_id FROM applied_outbox_batches ORDER BY id DESC LIMIT 1) AS b ON true`;

/** A position in (tx, id) order, both as decimal text. */
export interface OutboxPosition {
  tx: string;
  id: string;
}

export interface RelayPosition extends OutboxPosition {
  cluster_id: string | null;
  /** The cursor's tx lies beyond this cluster's horizon (a restore into another cluster). */
  ahead: boolean;
}

export const SELECT_RELAY_POSITION = `
  SELECT tx::text AS tx, id::text AS id, cluster_id, tx >= pg_snapshot_xmax(pg_current_snapshot()) AS ahead
  FROM (${RELAY_POSITION}) AS p`;

/** The cursor, the cluster it was recorded on, and whether its tx lies beyond this cluster's
 * horizon (pg_snapshot_xmax: the next id to be handed out; reading it assigns no id). */
export async function readRelayPosition(client: Queryable): Promise<RelayPosition> {
  const { rows } = await client.query<RelayPosition>({ text: SELECT_RELAY_POSITION });
  return rows[0]!;
}

/** Which cluster this is (NULL where the role may not read it: then only the horizon check runs).
 * Throws where pg_control_system may not be called at all. */
export async function readClusterId(client: Queryable): Promise<string | null> {
  const { rows } = await client.query<{ cluster_id: string | null }>({
    text: 'SELECT system_identifier::text AS cluster_id FROM pg_control_system()',
  });
  return rows[0]?.cluster_id ?? null;
}

/**
 * After a restore into another cluster: every row the old cluster wrote is renumbered, those at
 * or before the cursor (in the old cluster's order) as published (tx 1), the rest as not (tx 2);
 * rows this cluster wrote since keep their real ids (>= 3) and sort after both. Per key id order
 * is apply order, so the old rows keep their order.
 *
 * Which rows the old cluster wrote cannot be told by tx alone: its ids may overlap this cluster's.
 * A restore writes them anew, so their xmin is the restore's, no younger than the xmin of the
 * restored cursor row (the newest batch; tables are restored in name order, applied_outbox first);
 * a row this cluster wrote since is younger than that and its xmin is its own tx.
 * Appliers wait for the table lock (an insert between the two statements would be misread).
 * Run inside a transaction; returns how many rows were renumbered.
 */
export async function rebaselineOutbox(client: Queryable, args: { cursor: OutboxPosition; cluster: string | null }): Promise<number> {
  await client.query({ text: 'LOCK TABLE applied_outbox IN EXCLUSIVE MODE' });
  const moved = await client.query({
    text: `
      WITH restored AS (SELECT xmin AS at FROM applied_outbox_batches ORDER BY id DESC LIMIT 1)
      UPDATE applied_outbox AS o
      SET tx = CASE WHEN (o.tx, o.id) <= ($1::xid8, $2::bigint) THEN '1'::xid8 ELSE '2'::xid8 END
      FROM restored AS r
      WHERE NOT (age(o.xmin) < age(r.at) AND (o.tx::text::numeric % 4294967296)::text = o.xmin::text)`,
    values: [args.cursor.tx, args.cursor.id],
  });
  await client.query({
    text: `
      INSERT INTO applied_outbox_batches (last_tx, last_id, records, cluster_id)
      SELECT '1'::xid8, COALESCE((SELECT max(id) FROM applied_outbox WHERE tx = '1'::xid8), $1::bigint), 0, $2`,
    values: [args.cursor.id, args.cluster],
  });
  return moved.rowCount ?? 0;
}

export interface OutboxRow {
  id: string;
  tx: string;
  event_id: string;
  key: string;
  payload: string;
  source_topic: string;
  source_partition: number;
  source_offset: string;
  /** The apply span's W3C trace context; null when tracing was off (or before migration 0008). */
  traceparent: string | null;
  tracestate: string | null;
}

const OUTBOX_COLUMNS = `o.id, o.tx::text AS tx, o.event_id, o.key, o.payload, o.source_topic, o.source_partition,
    o.source_offset::text AS source_offset, o.traceparent, o.tracestate`;

// The cursor and the rows after it in one statement, so one snapshot and one round trip: rows only
// from transactions that have all ended (pg_snapshot_xmin; see migration 0002), at most $1 of them
// and, past the first, at most $2 bytes of payload in all. With no row, the LEFT JOIN still
// returns the cursor, its row columns NULL.
const READ_NEXT_OUTBOX = `
  SELECT p.tx AS cursor_tx, p.id AS cursor_id, p.cluster_id AS cursor_cluster, p.ahead AS cursor_ahead, w.*
  FROM (${SELECT_RELAY_POSITION}) AS p
  LEFT JOIN LATERAL (
    SELECT ${OUTBOX_COLUMNS},
      row_number() OVER (ORDER BY o.tx, o.id) AS ord,
      count(*) OVER () AS available,
      sum(octet_length(o.payload)) OVER (ORDER BY o.tx, o.id) AS bytes_through
    FROM (
      SELECT * FROM applied_outbox AS o
      WHERE (o.tx, o.id) > (p.tx::xid8, p.id::bigint)
        AND o.tx < pg_snapshot_xmin(pg_current_snapshot())
      ORDER BY o.tx, o.id
      LIMIT $1
    ) AS o
  ) AS w ON w.ord = 1 OR w.bytes_through <= $2
  ORDER BY w.ord`;

type NextOutboxRow = {
  cursor_tx: string;
  cursor_id: string;
  cursor_cluster: string | null;
  cursor_ahead: boolean;
  available: string | null;
} & { [K in keyof OutboxRow]: OutboxRow[K] | null };

export interface NextOutbox {
  position: RelayPosition;
  rows: OutboxRow[];
  /** Rows were left out for the byte bound: more are ready now. */
  cut: boolean;
}

/**
 * The relay's cursor and the next rows ready to publish: at most `limit`, and at most `maxBytes`
 * of payload beyond the first row (a record batch per partition must stay within the broker's
 * message.max.bytes, and the relay holds the batch in memory).
 */
export async function readNextOutbox(client: Queryable, args: { limit: number; maxBytes: number }): Promise<NextOutbox> {
  const { rows } = await client.query<NextOutboxRow>({ text: READ_NEXT_OUTBOX, values: [args.limit, args.maxBytes] });
  const first = rows[0]!;
  const position = { tx: first.cursor_tx, id: first.cursor_id, cluster_id: first.cursor_cluster, ahead: first.cursor_ahead };
  if (first.id === null) return { position, rows: [], cut: false };
  return {
    position,
    cut: rows.length < Number(first.available),
    rows: rows.map((r) => ({
      id: r.id!,
      tx: r.tx!,
      event_id: r.event_id!,
      key: r.key!,
      payload: r.payload!,
      source_topic: r.source_topic!,
      source_partition: r.source_partition!,
      source_offset: r.source_offset!,
      traceparent: r.traceparent,
      tracestate: r.tracestate,
    })),
  };
}

/**
 * Whether rows exist after ($1, $2). Not `EXISTS (... WHERE (tx, id) > ...)`: the planner expects a
 * third of the rows to match and plans that as a sequential scan that stops at the first match,
 * which with the relay caught up reads the whole outbox (test/foundation/outbox-plans.test.ts).
 * Ordered on the index's columns with LIMIT 1 it is one index probe.
 */
export const OUTBOX_HAS_PENDING = `
  SELECT (
    SELECT true FROM applied_outbox AS o
    WHERE (o.tx, o.id) > ($1::xid8, $2::bigint)
    ORDER BY o.tx, o.id LIMIT 1) IS NOT NULL AS pending`;

/** Rows after the cursor exist (committed or not yet visible to the relay). */
export async function outboxHasPending(client: Queryable, after: OutboxPosition): Promise<boolean> {
  const { rows } = await client.query<{ pending: boolean }>({ text: OUTBOX_HAS_PENDING, values: [after.tx, after.id] });
  return rows[0]?.pending === true;
}

/** The oldest transaction still running on the cluster (what holds pg_snapshot_xmin back), for the log. */
export async function oldestOpenTransaction(client: Queryable): Promise<Record<string, unknown> | undefined> {
  const { rows } = await client.query<Record<string, unknown>>({
    text: `
      SELECT pid, datname, usename, application_name, state, backend_xid::text AS xid,
        EXTRACT(EPOCH FROM now() - xact_start)::float8 AS open_seconds
      FROM pg_stat_activity
      WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
      ORDER BY age(backend_xid) DESC
      LIMIT 1`,
  });
  return rows[0];
}

/** Moves the cursor, never backwards (a former leader finishing late is a no-op). */
export async function recordOutboxBatch(
  client: Queryable,
  args: { last: OutboxPosition; records: number; cluster: string | null },
): Promise<void> {
  await client.query({
    text: `
      INSERT INTO applied_outbox_batches (last_tx, last_id, records, cluster_id)
      SELECT $1::xid8, $2::bigint, $3, $4
      FROM (${RELAY_POSITION}) AS p
      WHERE ($1::xid8, $2::bigint) > (p.tx, p.id)`,
    values: [args.last.tx, args.last.id, args.records, args.cluster],
  });
}

/** Rows not yet published (after the cursor), for operators, tests and benchmarks (one column, n). */
export const COUNT_UNPUBLISHED_OUTBOX = `
  SELECT count(*)::int AS n
  FROM applied_outbox AS o, (${RELAY_POSITION}) AS p
  WHERE (o.tx, o.id) > (p.tx, p.id)`;

export async function countUnpublishedOutbox(client: Queryable): Promise<number> {
  const { rows } = await client.query<{ n: number }>({ text: COUNT_UNPUBLISHED_OUTBOX });
  return rows[0]!.n;
}

/**
 * Seconds since the oldest unpublished row was written; 0 when none is waiting (the worker's gauge,
 * read on every scrape). The cursor enters as two scalar subqueries, which the index scan takes as
 * its start: joined as a row source it was a filter on a walk of the whole index.
 */
export const OLDEST_UNPUBLISHED_OUTBOX_AGE = `
  WITH p AS MATERIALIZED (${RELAY_POSITION})
  SELECT COALESCE((
    SELECT EXTRACT(EPOCH FROM now() - o.created_at)
    FROM applied_outbox AS o
    WHERE (o.tx, o.id) > ((SELECT tx FROM p), (SELECT id FROM p))
    ORDER BY o.tx, o.id LIMIT 1), 0)::float8 AS age_seconds`;

export async function oldestUnpublishedOutboxAge(client: Queryable): Promise<number> {
  const { rows } = await client.query<{ age_seconds: number }>({ text: OLDEST_UNPUBLISHED_OUTBOX_AGE });
  return rows[0]!.age_seconds;
}

/** The newest applied record's position (undefined: none yet): what a stopping relay publishes up to.
 * ORDER BY names the table's columns: a bare `id` would be the text output column, and '99' > '101'. */
export async function selectNewestOutboxPosition(client: Queryable): Promise<OutboxPosition | undefined> {
  const { rows } = await client.query<OutboxPosition>({
    text: `
      SELECT o.tx::text AS tx, o.id::text AS id FROM applied_outbox AS o ORDER BY o.tx DESC, o.id DESC LIMIT 1`,
  });
  return rows[0];
}

/**
 * Applied rows `o`, each with `b.published_at`: when the relay's batch covering the row (the
 * first whose end is at or past it) was published, NULL until then.
 */
export const APPLIED_ROWS_WITH_PUBLISHED_AT = `
      applied_outbox AS o
      LEFT JOIN LATERAL (
        SELECT published_at FROM applied_outbox_batches
        WHERE (last_tx, last_id) >= (o.tx, o.id)
        ORDER BY last_tx, last_id
        LIMIT 1
      ) AS b ON true`;

export interface AppliedRecordRow {
  event_id: string;
  created_at: Date;
  /** When the relay's batch covering the row was published (null: not yet). */
  published_at: Date | null;
  /** The apply span's W3C trace context (null: tracing was off). */
  traceparent: string | null;
}

/** A resource key's newest 50 applied records, newest first (bridge trace). */
export async function selectAppliedRecords(client: Queryable, key: string): Promise<AppliedRecordRow[]> {
  const { rows } = await client.query<AppliedRecordRow>({
    text: `
      SELECT o.event_id, o.created_at, b.published_at, o.traceparent
      FROM ${APPLIED_ROWS_WITH_PUBLISHED_AT}
      WHERE o.key = $1
      ORDER BY o.id DESC
      LIMIT 50`,
    values: [key],
  });
  return rows;
}
