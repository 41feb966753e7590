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
 * kind 'inbox' (a = event_id, b = body_sha256, c = status), kind 'idem' (a = tenant_id,
 * b = idempotency_key, c = event_id), kind 'state' (a, b, c = tenant, type, id; version, deleted).
 * Every lookup must stay an index probe per key: a hash join scans the whole table per chunk,
 * which grows with the table. LATERAL alone does not ensure that (the planner pulls a simple
 * subquery up into a plain join and chose a hash join + seq scan for 1000-key chunks), so each
 * subquery carries OFFSET 0, which keeps it a parameterised subquery (an index scan per key). */
export const READ_CHUNK_CONTEXT = `
  SELECT 'inbox' AS kind, i.event_id AS a, i.body_sha256 AS b, i.status AS c, NULL::bigint AS version, NULL::boolean AS deleted
  FROM unnest($1::text[]) AS k(event_id)
  CROSS JOIN LATERAL (
    SELECT event_id, body_sha256, status FROM inbox_events WHERE event_id = k.event_id OFFSET 0
  ) AS i
  UNION ALL
  SELECT 'idem', i.tenant_id, i.idempotency_key, i.event_id, NULL, NULL
  FROM unnest($2::text[], $3::text[]) AS k(tenant_id, idempotency_key)
  CROSS JOIN LATERAL (
    SELECT tenant_id, idempotency_key, event_id FROM inbox_events
    WHERE tenant_id = k.tenant_id AND idempotency_key = k.idempotency_key
      AND idempotency_key IS NOT NULL AND duplicate_of IS NULL OFFSET 0
  ) AS i
  UNION ALL
  SELECT 'state', s.tenant_id, s.resource_type, s.resource_id, s.version, s.deleted
  FROM unnest($4::text[], $5::text[], $6::text[]) AS k(tenant_id, resource_type, resource_id)
  CROSS JOIN LATERAL (
    SELECT tenant_id, resource_type, resource_id, version, deleted FROM resource_state
    WHERE tenant_id = k.tenant_id AND resource_type = k.resource_type AND resource_id = k.resource_id OFFSET 0
  ) AS s`;

/**
 * Every effect of a chunk in one statement. Each parameter is a JSON array of row objects
 * (JSON.stringify is native and far cheaper than the driver's text[] literal escaping):
 * $1 inbox rows, $2 resource states, $3 outbox rows, $4 anomalies. Returns how many inbox and
 * state rows were written, which the applier checks against what it decided.
 *
 * Inbox: new rows, or rows a failure path left pending (received / retrying / dead_lettered)
 * with the same body, now settled.
 * State: the version guard is also in SQL, so no code path can ever move a resource backwards.
 * Outbox: ORDER BY n (apply order), so ids follow apply order; the relay publishes in id order.
 */
export const WRITE_CHUNK_EFFECTS = `
  WITH inbox AS (
    INSERT INTO inbox_events (
      event_id, idempotency_key, duplicate_of, tenant_id, resource_type, resource_id, resource_version,
      event_type, status, reason, body_sha256, payload, source_topic, source_partition, source_offset,
      occurred_at, received_at)
    SELECT event_id, idempotency_key, duplicate_of, tenant_id, resource_type, resource_id, resource_version,
      event_type, status, reason, body_sha256, payload, source_topic, source_partition, source_offset,
      occurred_at, received_at
    FROM json_to_recordset($1::json) AS r(
      event_id text, idempotency_key text, duplicate_of text, tenant_id text, resource_type text,
      resource_id text, resource_version bigint, event_type text, status text, reason text,
      body_sha256 text, payload text, source_topic text, source_partition int, source_offset bigint,
      occurred_at timestamptz, received_at timestamptz)
    ON CONFLICT (event_id) DO UPDATE SET
      status = EXCLUDED.status,
      reason = EXCLUDED.reason,
      duplicate_of = EXCLUDED.duplicate_of,
      resource_version = EXCLUDED.resource_version,
      updated_at = now()
    WHERE inbox_events.status IN ('received', 'retrying', 'dead_lettered')
      AND inbox_events.body_sha256 = EXCLUDED.body_sha256
    RETURNING 1
  ), state AS (
    INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, deleted, data, last_event_id)
    SELECT tenant_id, resource_type, resource_id, version, deleted, data, last_event_id
    FROM json_to_recordset($2::json) AS r(
      tenant_id text, resource_type text, resource_id text, version bigint, deleted boolean, data jsonb,
      last_event_id text)
    ON CONFLICT (tenant_id, resource_type, resource_id) DO UPDATE SET
      version = EXCLUDED.version,
      deleted = EXCLUDED.deleted,
      data = EXCLUDED.data,
      last_event_id = EXCLUDED.last_event_id,
      updated_at = now()
    WHERE resource_state.version < EXCLUDED.version
    RETURNING 1
  ), outbox AS (
    INSERT INTO applied_outbox (event_id, key, payload, headers)
    SELECT event_id, key, payload, headers
    FROM json_to_recordset($3::json) AS r(n int, event_id text, key text, payload text, headers jsonb)
    ORDER BY n
    RETURNING 1
  ), anomalies AS (
    INSERT INTO inbox_anomalies (
      event_id, body_sha256, original_body_sha256, payload, tenant_id, resource_type, resource_id,
      resource_version, source_topic, source_partition, source_offset)
    SELECT event_id, body_sha256, original_body_sha256, payload, tenant_id, resource_type, resource_id,
      resource_version, source_topic, source_partition, source_offset
    FROM json_to_recordset($4::json) AS r(
      event_id text, body_sha256 text, original_body_sha256 text, payload text, tenant_id text,
      resource_type text, resource_id text, resource_version bigint, source_topic text,
      source_partition int, source_offset bigint)
    ON CONFLICT (event_id, body_sha256) DO NOTHING
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM inbox)::int AS inbox_rows,
         (SELECT count(*) FROM state)::int AS state_rows,
         (SELECT count(*) FROM outbox)::int AS outbox_rows,
         (SELECT count(*) FROM anomalies)::int AS anomaly_rows`;

// Relay. Only one relay publishes at a time (per database), which keeps per-key order on the topic.
export const TRY_RELAY_LEADER_LOCK = `SELECT pg_try_advisory_xact_lock(7261003412) AS leader`;

export const SELECT_UNPUBLISHED_OUTBOX = `
  SELECT id, key, payload, headers
  FROM applied_outbox
  WHERE published_at IS NULL
  ORDER BY id
  LIMIT $1`;

export const MARK_OUTBOX_PUBLISHED = `
  UPDATE applied_outbox SET published_at = now() WHERE id = ANY($1::bigint[])`;

export const OLDEST_UNPUBLISHED_OUTBOX_AGE = `
  SELECT COALESCE((
    SELECT EXTRACT(EPOCH FROM now() - created_at)
    FROM applied_outbox WHERE published_at IS NULL ORDER BY id LIMIT 1), 0)::float8 AS age_seconds`;
