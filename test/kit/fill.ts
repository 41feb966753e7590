import type pg from 'pg';
import { sampleThemeSnapshot } from '#domain/contract/index.ts';

export const SETTLED = ['applied', 'stale', 'duplicate', 'duplicate_version'];
export const DAY_S = 86_400;

/**
 * inbox_events rows 1..n: status by i % 10 (0-3, 9 applied; 4 stale; 5 duplicate; 6 duplicate_version;
 * 7 pending: received / retrying / dead_lettered by i / 100 % 3; 8 quarantined), age by i / 10 % 3
 * (1, 60 or 200 days since the last update, plus up to 1000 s), body a valid v1 envelope except every
 * 13th row (not JSON). Every combination of status and age occurs.
 */
export async function fillInbox(pool: pg.Pool, n: number): Promise<void> {
  await pool.query(
    `INSERT INTO inbox_events (tenant_id, event_id, resource_type, resource_id, resource_version, event_type,
       status, body_sha256, payload, first_seen_at, updated_at)
     SELECT tenant_id, event_id, 'theme', resource_id, i, 'theme.updated', status,
       encode(sha256(convert_to(payload, 'UTF8')), 'hex'), payload, at, at
     FROM (
       SELECT i, 'tenant_' || (i % 3) AS tenant_id, 'evt_ret_' || i AS event_id, 'thm_' || (i % 500) AS resource_id,
         CASE i % 10
           WHEN 4 THEN 'stale' WHEN 5 THEN 'duplicate' WHEN 6 THEN 'duplicate_version' WHEN 8 THEN 'quarantined'
           WHEN 7 THEN (ARRAY['received', 'retrying', 'dead_lettered'])[i / 100 % 3 + 1]
           ELSE 'applied' END AS status,
         now() - make_interval(days => (ARRAY[1, 60, 200])[i / 10 % 3 + 1], secs => i % 1000) AS at,
         CASE WHEN i % 13 = 0 THEN 'not json {' || i
           ELSE json_build_object(
             'event_id', 'evt_ret_' || i, 'event_type', 'theme.updated', 'event_version', 1,
             'occurred_at', '2026-01-01T00:00:00Z', 'delivery_attempt', 1 + i % 2, 'tenant_id', 'tenant_' || (i % 3),
             'resource', json_build_object('type', 'theme', 'id', 'thm_' || (i % 500), 'version', i),
             'data', $2::json)::text END AS payload
       FROM generate_series(1, $1::int) AS i
     ) AS g`,
    [n, JSON.stringify(sampleThemeSnapshot())],
  );
}

/**
 * applied_outbox ids 1..10000 in one transaction (so (tx, id) order is id order), all created 100
 * days ago. Every 10th row has a key of its own (the newest of its key: kept forever); the others
 * share 900 keys whose newest rows are in 9001..10000. Relay batches: ten of 600 rows up to id 6000
 * published 30..21 days ago, one up to 7000 published 2 days ago, the cursor up to 8000 an hour
 * ago; 8001..10000 are unpublished.
 */
export async function fillOutbox(pool: pg.Pool): Promise<void> {
  await pool.query(
    `INSERT INTO applied_outbox (id, event_id, key, payload, created_at, source_topic, source_partition, source_offset)
     SELECT i, 'evt_out_' || i,
       CASE WHEN i % 10 = 0 THEN 'tenant_0/theme/solo_' || i ELSE 'tenant_0/theme/multi_' || (i % 1000) END,
       repeat('x', 200), now() - interval '100 days', 'events', 0, i
     FROM generate_series(1, 10000) AS i`,
  );
  await pool.query(`SELECT setval(pg_get_serial_sequence('applied_outbox', 'id'), 10000)`);
  await pool.query(
    `INSERT INTO applied_outbox_batches (last_tx, last_id, records, published_at)
     SELECT (SELECT tx FROM applied_outbox LIMIT 1), last_id, 600, at
     FROM (SELECT k * 600 AS last_id, now() - make_interval(days => 31 - k) AS at FROM generate_series(1, 10) AS k
           UNION ALL SELECT 7000, now() - interval '2 days'
           UNION ALL SELECT 8000, now() - interval '1 hour') AS b
     ORDER BY last_id`,
  );
}

/** inbox_anomalies rows 1..n: status by i % 3 (quarantined, dead_lettered, resolved), age by i / 3 % 3 (1, 60, 200 days). */
export async function fillAnomalies(pool: pg.Pool, n: number): Promise<void> {
  await pool.query(
    `INSERT INTO inbox_anomalies (event_id, status, body_sha256, payload, tenant_id, resource_type, resource_id,
       resource_version, detected_at, updated_at)
     SELECT 'evt_anom_' || i, (ARRAY['quarantined', 'dead_lettered', 'resolved'])[i % 3 + 1], md5(i::text),
       'anomaly body ' || i, 'tenant_0', 'theme', 'thm_' || i, i, at, at
     FROM (SELECT i, now() - make_interval(days => (ARRAY[1, 60, 200])[i / 3 % 3 + 1], secs => i) AS at
           FROM generate_series(1, $1::int) AS i) AS g`,
    [n],
  );
}
