// Every statement of the apply path. Set-based (unnest) so one transaction applies a whole chunk.

/** One round trip. A chunk's lookups are a few hundred index probes: starting parallel workers for
 * them costs more than the probes (and steals the cores the worker and the broker need). */
export const BEGIN_APPLY_TRANSACTION = 'BEGIN; SET LOCAL max_parallel_workers_per_gather = 0';

/** Serialises every applier (main consumer, retry consumers, CLI reprocess) per resource key.
 * Locks are taken in hash order so two chunks sharing keys can never deadlock. */
export const LOCK_RESOURCE_KEYS = `
  SELECT pg_advisory_xact_lock(h)
  FROM (SELECT DISTINCT hashtextextended(k, 7261) AS h FROM unnest($1::text[]) AS k ORDER BY h) AS keys`;

/** Everything the decisions need, in one round trip (after the keys are locked):
 * kind 'inbox' (a, b = tenant_id, event_id; c = status; d = body_sha256; e = payload, which only
 * redeliveries and settled retries read: a new event has no row; once retention pruned the payload,
 * e is the stored fingerprint and version is 1), kind 'idem' (a = tenant_id, b = idempotency_key,
 * c = the event_id that applied it), kind 'state' (a, b, c = tenant, type, id; version, deleted).
 * Every lookup must stay an index probe per key: a hash join scans the whole table per chunk,
 * which grows with the table. LATERAL alone does not ensure that (the planner pulls a simple
 * subquery up into a plain join and chose a hash join + seq scan for 1000-key chunks), so each
 * subquery carries OFFSET 0, which keeps it a parameterised subquery (an index scan per key). */
export const READ_CHUNK_CONTEXT = `
  SELECT 'inbox' AS kind, i.tenant_id AS a, i.event_id AS b, i.status AS c, i.body_sha256 AS d,
    COALESCE(i.payload, i.fingerprint) AS e, (i.payload IS NULL)::int::bigint AS version, NULL::boolean AS deleted
  FROM unnest($1::text[], $2::text[]) AS k(tenant_id, event_id)
  CROSS JOIN LATERAL (
    SELECT tenant_id, event_id, status, body_sha256, payload, fingerprint FROM inbox_events
    WHERE tenant_id = k.tenant_id AND event_id = k.event_id OFFSET 0
  ) AS i
  UNION ALL
  SELECT 'idem', i.tenant_id, i.idempotency_key, i.event_id, NULL, NULL, NULL, NULL
  FROM unnest($3::text[], $4::text[]) AS k(tenant_id, idempotency_key)
  CROSS JOIN LATERAL (
    SELECT tenant_id, idempotency_key, event_id FROM inbox_events
    WHERE tenant_id = k.tenant_id AND idempotency_key = k.idempotency_key AND status = 'applied' OFFSET 0
  ) AS i
  UNION ALL
  SELECT 'state', s.tenant_id, s.resource_type, s.resource_id, NULL, NULL, s.version, s.deleted
  FROM unnest($5::text[], $6::text[], $7::text[]) AS k(tenant_id, resource_type, resource_id)
  CROSS JOIN LATERAL (
    SELECT tenant_id, resource_type, resource_id, version, deleted FROM resource_state
    WHERE tenant_id = k.tenant_id AND resource_type = k.resource_type AND resource_id = k.resource_id OFFSET 0
  ) AS s`;

/**
 * Every effect of a chunk in one statement. Short columns are array literals; the big ones (event
 * bodies, snapshots, applied records) are packed bytea parameters sliced per row (see
 * pg-params.ts), so no row is escaped in JavaScript or parsed twice in Postgres. Returns how many
 * inbox and state rows were written, which the applier checks against what it decided.
 *
 * Inbox ($1-$19, $38): new rows, or rows a failure path left pending (received / retrying /
 * dead_lettered) with the same content (the applier compared it), now settled. (The delivery
 * attempt came later than the rest; placeholders need not be in order.)
 * State ($20-$28): the version guard is also in SQL, so no code path can ever move a resource
 * backwards. A negative data length is a tombstone (NULL data).
 * Outbox ($29-$36): ORDER BY ordinality (apply order), so ids follow apply order within the
 * transaction; tx is the transaction's id (default), which orders transactions for the relay.
 * Anomalies ($37): JSON rows; rare.
 */
export const WRITE_CHUNK_EFFECTS = `
  WITH inbox AS (
    INSERT INTO inbox_events (
      event_id, idempotency_key, duplicate_of, tenant_id, resource_type, resource_id, resource_version,
      event_type, status, reason, body_sha256, source_topic, source_partition, source_offset,
      occurred_at, received_at, delivery_attempt, payload)
    SELECT event_id, idempotency_key, duplicate_of, tenant_id, resource_type, resource_id, resource_version,
      event_type, status, reason, body_sha256, source_topic, source_partition, source_offset,
      occurred_at, received_at, delivery_attempt,
      convert_from(substring($17::bytea FROM p_off FOR p_len), 'UTF8')
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
      $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::int[], $14::bigint[],
      $15::timestamptz[], $16::timestamptz[], $38::int[], $18::int[], $19::int[])
      AS r(event_id, idempotency_key, duplicate_of, tenant_id, resource_type, resource_id, resource_version,
      event_type, status, reason, body_sha256, source_topic, source_partition, source_offset,
      occurred_at, received_at, delivery_attempt, p_off, p_len)
    ON CONFLICT (tenant_id, event_id) DO UPDATE SET
      status = EXCLUDED.status,
      reason = EXCLUDED.reason,
      duplicate_of = EXCLUDED.duplicate_of,
      resource_version = EXCLUDED.resource_version,
      updated_at = now()
    WHERE inbox_events.status IN ('received', 'retrying', 'dead_lettered')
    RETURNING 1
  ), state AS (
    INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, deleted, last_event_id, data)
    SELECT tenant_id, resource_type, resource_id, version, deleted, last_event_id,
      CASE WHEN d_len < 0 THEN NULL ELSE convert_from(substring($26::bytea FROM d_off FOR d_len), 'UTF8')::jsonb END
    FROM unnest($20::text[], $21::text[], $22::text[], $23::bigint[], $24::boolean[], $25::text[], $27::int[], $28::int[])
      AS r(tenant_id, resource_type, resource_id, version, deleted, last_event_id, d_off, d_len)
    ON CONFLICT (tenant_id, resource_type, resource_id) DO UPDATE SET
      version = EXCLUDED.version,
      deleted = EXCLUDED.deleted,
      data = EXCLUDED.data,
      last_event_id = EXCLUDED.last_event_id,
      updated_at = now()
    WHERE resource_state.version < EXCLUDED.version
    RETURNING 1
  ), outbox AS (
    INSERT INTO applied_outbox (event_id, key, source_topic, source_partition, source_offset, payload)
    SELECT event_id, key, source_topic, source_partition, source_offset,
      convert_from(substring($34::bytea FROM p_off FOR p_len), 'UTF8')
    FROM unnest($29::text[], $30::text[], $31::text[], $32::int[], $33::bigint[], $35::int[], $36::int[])
      WITH ORDINALITY AS r(event_id, key, source_topic, source_partition, source_offset, p_off, p_len, n)
    ORDER BY n
    RETURNING 1
  ), anomalies AS (
    INSERT INTO inbox_anomalies (
      event_id, body_sha256, original_body_sha256, payload, tenant_id, resource_type, resource_id,
      resource_version, source_topic, source_partition, source_offset)
    SELECT event_id, body_sha256,
      (SELECT o.body_sha256 FROM inbox_events AS o WHERE o.tenant_id = r.tenant_id AND o.event_id = r.event_id),
      payload, tenant_id, resource_type, resource_id,
      resource_version, source_topic, source_partition, source_offset
    FROM json_to_recordset($37::json) AS r(
      event_id text, body_sha256 text, payload text, tenant_id text,
      resource_type text, resource_id text, resource_version bigint, source_topic text,
      source_partition int, source_offset bigint)
    ON CONFLICT (tenant_id, event_id, body_sha256) DO NOTHING
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM inbox)::int AS inbox_rows,
         (SELECT count(*) FROM state)::int AS state_rows,
         (SELECT count(*) FROM outbox)::int AS outbox_rows,
         (SELECT count(*) FROM anomalies)::int AS anomaly_rows`;

// Relay (see migration 0002). Only one relay publishes at a time (per database): with the cursor,
// two relays would publish the same rows, and per-key order on the topic needs a single writer.
// The leader holds this advisory lock for its session (services/worker/relay-leadership.ts).
export const RELAY_LEADER_LOCK_KEY = 7261003412;

/** The relay's cursor: the last published row in (tx, id) order; (0, 0) before the first batch. */
const RELAY_POSITION = `
  SELECT COALESCE(b.last_tx, '0'::xid8) AS tx, COALESCE(b.last_id, 0) AS id, b.cluster_id
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (SELECT last_tx, last_id, cluster_id FROM applied_outbox_batches ORDER BY id DESC LIMIT 1) AS b ON true`;

/** The cursor, the cluster it was recorded on, and whether its tx lies beyond this cluster's
 * horizon (pg_snapshot_xmax: the next id to be handed out; reading it assigns no id). */
export const SELECT_RELAY_POSITION = `
  SELECT tx::text AS tx, id::text AS id, cluster_id, tx >= pg_snapshot_xmax(pg_current_snapshot()) AS ahead
  FROM (${RELAY_POSITION}) AS p`;

/** Which cluster this is (NULL where the role may not read it: then only the horizon check runs). */
export const SELECT_CLUSTER_ID = `SELECT system_identifier::text AS cluster_id FROM pg_control_system()`;

/**
 * After a restore into another cluster: every row whose tx lies beyond this cluster's horizon came
 * from the old cluster. Those at or before the cursor were published (tx 1), the rest were not
 * (tx 2); new rows have real ids (>= 3) and sort after both, and per key id order is apply order.
 * Appliers wait for the table lock (an insert between the two statements would be misread).
 */
export const REBASELINE_OUTBOX = `
  UPDATE applied_outbox
  SET tx = CASE WHEN (tx, id) <= ($1::xid8, $2::bigint) THEN '1'::xid8 ELSE '2'::xid8 END
  WHERE tx >= pg_snapshot_xmax(pg_current_snapshot())`;

export const RECORD_CURSOR_CLUSTER = `
  INSERT INTO applied_outbox_batches (last_tx, last_id, records, cluster_id) VALUES ($1::xid8, $2::bigint, 0, $3)`;

export const RECORD_REBASELINED_CURSOR = `
  INSERT INTO applied_outbox_batches (last_tx, last_id, records, cluster_id)
  SELECT '1'::xid8, COALESCE((SELECT max(id) FROM applied_outbox WHERE tx = '1'::xid8), $1::bigint), 0, $2`;

/** The next rows after the cursor, only from transactions that have all ended (see migration 0002). */
export const SELECT_NEXT_OUTBOX = `
  SELECT o.id, o.tx::text AS tx, o.event_id, o.key, o.payload, o.source_topic, o.source_partition,
    o.source_offset::text AS source_offset
  FROM applied_outbox AS o
  WHERE (o.tx, o.id) > ($1::xid8, $2::bigint)
    AND o.tx < pg_snapshot_xmin(pg_current_snapshot())
  ORDER BY o.tx, o.id
  LIMIT $3`;

/** Rows after the cursor exist (committed or not yet visible to the relay). */
export const OUTBOX_HAS_PENDING = `
  SELECT EXISTS (SELECT 1 FROM applied_outbox WHERE (tx, id) > ($1::xid8, $2::bigint)) AS pending`;

/** The oldest transaction still running on the cluster (what holds pg_snapshot_xmin back), for the log. */
export const OLDEST_OPEN_TRANSACTION = `
  SELECT pid, datname, usename, application_name, state, backend_xid::text AS xid,
    EXTRACT(EPOCH FROM now() - xact_start)::float8 AS open_seconds
  FROM pg_stat_activity
  WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
  ORDER BY age(backend_xid) DESC
  LIMIT 1`;

/** Moves the cursor, never backwards (a former leader finishing late is a no-op). */
export const RECORD_OUTBOX_BATCH = `
  INSERT INTO applied_outbox_batches (last_tx, last_id, records, cluster_id)
  SELECT $1::xid8, $2::bigint, $3, $4
  FROM (${RELAY_POSITION}) AS p
  WHERE ($1::xid8, $2::bigint) > (p.tx, p.id)`;

/** Rows not yet published (after the cursor), for operators, tests and benchmarks. */
export const COUNT_UNPUBLISHED_OUTBOX = `
  SELECT count(*)::int AS n
  FROM applied_outbox AS o, (${RELAY_POSITION}) AS p
  WHERE (o.tx, o.id) > (p.tx, p.id)`;

export const OLDEST_UNPUBLISHED_OUTBOX_AGE = `
  SELECT COALESCE((
    SELECT EXTRACT(EPOCH FROM now() - o.created_at)
    FROM applied_outbox AS o, (${RELAY_POSITION}) AS p
    WHERE (o.tx, o.id) > (p.tx, p.id)
    ORDER BY o.tx, o.id LIMIT 1), 0)::float8 AS age_seconds`;
