// The apply path's statements (shared/domain/apply/snapshot-applier.ts): one transaction applies a
// whole chunk of events across inbox_events, resource_state, applied_outbox and inbox_anomalies,
// set-based (unnest), in four round trips: BEGIN with the key locks, one read, one write, COMMIT.
// The read and the write are named, so each session prepares them once: planning them for every
// transaction was most of a one-event transaction's Postgres CPU (`bench/worker/pg-cpu.ts 300 1`
// measures it), which a worker at a few events a second pays per event. Generic plans are safe here: every lookup is a lateral index probe (OFFSET 0, below)
// whatever the chunk size, and test/worker/prepared-apply.test.ts applies a full chunk through them.
import {
  bool,
  columns,
  int4,
  int8,
  packedJsonbOrNull,
  packedText,
  recordsetOf,
  statement,
  text,
  timestamptz,
  unnestOf,
  type RowOf,
} from './columns.ts';
import pg from 'pg';
import type { Queryable } from './session.ts';

/** A chunk's lookups are a few hundred index probes: starting parallel workers for them costs more
 * than the probes (and steals the cores the worker and the broker need). */
export const BEGIN_APPLY_TRANSACTION = 'BEGIN; SET LOCAL max_parallel_workers_per_gather = 0';

const NEEDS_ESCAPING = /['\\]/;

/**
 * BEGIN and the chunk's resource-key locks in one round trip: a simple query of three statements,
 * the keys inlined as escaped literals (a simple query takes no parameters). The locks serialise
 * every applier (main consumer, retry consumers, CLI reprocess) per resource key, taken in hash
 * order so two chunks sharing keys can never deadlock. They stay a statement of their own, before
 * the read: a read in the same statement would see the snapshot taken before the lock wait. A
 * separate round trip for BEGIN was a fifth of the apply transaction's round trips; planning this
 * statement each time costs next to nothing (no table is read).
 */
export function beginApplyAndLock(keys: readonly string[]): string {
  // Keys without a quote or a backslash are literals as they are: one join, where pg's escaping
  // builds each key up character by character.
  const plain = keys.length > 0 && keys.every((k) => !NEEDS_ESCAPING.test(k));
  const list = plain ? `'${keys.join("','")}'` : keys.map((k) => pg.escapeLiteral(k)).join(',');
  return `${BEGIN_APPLY_TRANSACTION};
  SELECT pg_advisory_xact_lock(h)
  FROM (SELECT DISTINCT hashtextextended(k, 7261) AS h FROM unnest(ARRAY[${list}]::text[]) AS k ORDER BY h) AS keys`;
}

const EVENT_KEYS = columns({ tenant_id: text, event_id: text });
const IDEMPOTENCY_KEYS = columns({ tenant_id: text, idempotency_key: text });
const RESOURCES = columns({ tenant_id: text, resource_type: text, resource_id: text });

/** What the decisions need to know of a chunk's events, idempotency keys and resources. */
export interface ChunkKeys {
  events: RowOf<typeof EVENT_KEYS>[];
  idempotencyKeys: RowOf<typeof IDEMPOTENCY_KEYS>[];
  resources: RowOf<typeof RESOURCES>[];
}

/** An inbox row of one of the chunk's events. */
export interface KnownInboxContext {
  kind: 'inbox';
  tenant_id: string;
  event_id: string;
  status: string;
  body_sha256: string;
  /** The stored body; null once retention pruned it (then fingerprint is what it kept, or null). */
  payload: string | null;
  fingerprint: string | null;
}

/** The event that applied one of the chunk's idempotency keys. */
export interface KnownIdempotencyContext {
  kind: 'idem';
  tenant_id: string;
  idempotency_key: string;
  event_id: string;
}

/** The stored state of one of the chunk's resources. */
export interface KnownStateContext {
  kind: 'state';
  tenant_id: string;
  resource_type: string;
  resource_id: string;
  /** bigint, as text; null for a row ordered by occurred_at from events without a version. */
  version: string | null;
  deleted: boolean;
  /** last_occurred_at in microseconds since the epoch, as text; null for a row ordered by version. */
  last_occurred_us: string | null;
  /** What orders the row; an event of the other ordering never applies to it. */
  ordered_by: 'version' | 'occurred_at';
}

export type ChunkContextRow = KnownInboxContext | KnownIdempotencyContext | KnownStateContext;

/**
 * Everything the decisions need, in one round trip (after the keys are locked): one row per known
 * inbox row, applied idempotency key and stored resource, told apart by `kind`; each kind fills its
 * own columns (the others are NULL). Only redeliveries and settled retries read an inbox payload:
 * a new event has no row.
 * Every lookup must stay an index probe per key: a hash join scans the whole table per chunk,
 * which grows with the table. LATERAL alone does not ensure that (the planner pulls a simple
 * subquery up into a plain join and chose a hash join + seq scan for 1000-key chunks), so each
 * subquery carries OFFSET 0, which keeps it a parameterised subquery (an index scan per key).
 */
const READ_CHUNK_CONTEXT = statement(
  { events: unnestOf(EVENT_KEYS, 'k'), idempotencyKeys: unnestOf(IDEMPOTENCY_KEYS, 'k'), resources: unnestOf(RESOURCES, 'k') },
  ({ events, idempotencyKeys, resources }) => `
  SELECT 'inbox' AS kind, i.tenant_id, i.event_id, i.status, i.body_sha256, i.payload, i.fingerprint,
    NULL::text AS idempotency_key, NULL::text AS resource_type, NULL::text AS resource_id,
    NULL::bigint AS version, NULL::boolean AS deleted, NULL::bigint AS last_occurred_us, NULL::text AS ordered_by
  FROM ${events.from}
  CROSS JOIN LATERAL (
    SELECT tenant_id, event_id, status, body_sha256, payload, fingerprint FROM inbox_events
    WHERE tenant_id = k.tenant_id AND event_id = k.event_id OFFSET 0
  ) AS i
  UNION ALL
  SELECT 'idem', i.tenant_id, i.event_id, NULL, NULL, NULL, NULL, i.idempotency_key, NULL, NULL, NULL, NULL, NULL, NULL
  FROM ${idempotencyKeys.from}
  CROSS JOIN LATERAL (
    SELECT tenant_id, idempotency_key, event_id FROM inbox_events
    WHERE tenant_id = k.tenant_id AND idempotency_key = k.idempotency_key AND status = 'applied' OFFSET 0
  ) AS i
  UNION ALL
  SELECT 'state', s.tenant_id, NULL, NULL, NULL, NULL, NULL, NULL, s.resource_type, s.resource_id, s.version, s.deleted,
    -- Exact: extract() is numeric, and timestamptz keeps whole microseconds.
    (extract(epoch FROM s.last_occurred_at) * 1000000)::bigint, s.ordered_by
  FROM ${resources.from}
  CROSS JOIN LATERAL (
    SELECT tenant_id, resource_type, resource_id, version, deleted, last_occurred_at, ordered_by FROM resource_state
    WHERE tenant_id = k.tenant_id AND resource_type = k.resource_type AND resource_id = k.resource_id OFFSET 0
  ) AS s`,
);

export async function readChunkContext(client: Queryable, keys: ChunkKeys): Promise<ChunkContextRow[]> {
  const { rows } = await client.query<ChunkContextRow>({
    name: 'apply-read-context',
    text: READ_CHUNK_CONTEXT.text,
    values: READ_CHUNK_CONTEXT.values(keys),
  });
  return rows;
}

// The chunk statement's columns per table, exported for bench/worker/copy-ceiling.ts, which COPYs
// the same rows into the same columns.
export const INBOX_ROWS = columns({
  event_id: text,
  idempotency_key: text,
  duplicate_of: text,
  tenant_id: text,
  resource_type: text,
  resource_id: text,
  resource_version: int8,
  event_type: text,
  status: text,
  reason: text,
  body_sha256: text,
  source_topic: text,
  source_partition: int4,
  source_offset: int8,
  occurred_at: timestamptz,
  received_at: timestamptz,
  /** The provider's attempt number; most deliveries carry none. */
  delivery_attempt: int4,
  /** The `source` header: the webhook source, or 'reconcile' for a pulled snapshot. */
  source: text,
  /** What triggered a pulled snapshot (the `reconcile-trigger` header); null for webhooks. */
  reconcile_trigger: text,
  /** The W3C trace id of this delivery (its apply span's, or its traceparent header's); null: no trace. */
  trace_id: text,
  /** The raw body. */
  payload: packedText,
});
export const STATE_ROWS = columns({
  tenant_id: text,
  resource_type: text,
  resource_id: text,
  /** Null when the event had none (a source ordering by occurred_at). */
  version: int8,
  deleted: bool,
  last_event_id: text,
  /** The resource's partition on the bridge's topics: the key a store split by partition shards on. */
  source_partition: int4,
  /** The snapshot as JSON; null for a tombstone. */
  data: packedJsonbOrNull,
  /** Ordered by occurred_at: its time at microseconds (formatMicros); null: ordered by version. */
  last_occurred_at: timestamptz,
  /** 'version' or 'occurred_at': the applied event's ordering, which must be the row's. */
  ordered_by: text,
});
export const OUTBOX_ROWS = columns({
  event_id: text,
  key: text,
  source_topic: text,
  source_partition: int4,
  source_offset: int8,
  /** The applied record, serialised once: the relay publishes these exact bytes. */
  payload: packedText,
  /** The apply span's W3C trace context (null with tracing off): the relay continues it. */
  traceparent: text,
  tracestate: text,
});
// Anomalies are rare: JSON rows. original_body_sha256 is read from the inbox row in SQL.
export const ANOMALY_ROWS = columns({
  event_id: text,
  body_sha256: text,
  payload: text,
  tenant_id: text,
  resource_type: text,
  resource_id: text,
  resource_version: int8,
  source_topic: text,
  source_partition: int4,
  source_offset: int8,
  trace_id: text,
});

export type InboxChunkRow = RowOf<typeof INBOX_ROWS>;
export type StateChunkRow = RowOf<typeof STATE_ROWS>;
export type OutboxChunkRow = RowOf<typeof OUTBOX_ROWS>;
export type AnomalyChunkRow = RowOf<typeof ANOMALY_ROWS>;

export interface ChunkEffects {
  inbox: InboxChunkRow[];
  state: StateChunkRow[];
  outbox: OutboxChunkRow[];
  anomalies: AnomalyChunkRow[];
}

/**
 * Every effect of a chunk in one statement. Short columns are array literals; the big ones (event
 * bodies, snapshots, applied records) are packed bytea parameters sliced per row (see
 * columns.ts), so no row is escaped in JavaScript or parsed twice in Postgres.
 *
 * Inbox: new rows, or rows a failure path left pending (received / retrying / dead_lettered) with
 * the same content (the applier compared it), now settled.
 * State: the ordering guard is also in SQL, so no code path can ever move a resource backwards or
 * write across orderings: a row takes only an event of its own ordering (ordered_by; only
 * `bridge ordering switch` changes it), compared by version or by occurred_at. A row the switch
 * left without the key (a NULL version or last_occurred_at) takes the first event of its ordering,
 * as decideOutcomes does.
 * Outbox: ORDER BY ordinality (apply order), so ids follow apply order within the transaction; tx
 * is the transaction's id (default), which orders transactions for the relay.
 */
const WRITE_CHUNK_EFFECTS = statement(
  {
    inbox: unnestOf(INBOX_ROWS, 'r'),
    state: unnestOf(STATE_ROWS, 'r'),
    outbox: unnestOf(OUTBOX_ROWS, 'r', { ordinality: 'n' }),
    anomalies: recordsetOf(ANOMALY_ROWS, 'r'),
  },
  ({ inbox, state, outbox, anomalies }) => `
  WITH inbox AS (
    INSERT INTO inbox_events (${inbox.names})
    SELECT ${inbox.select}
    FROM ${inbox.from}
    ON CONFLICT (tenant_id, event_id) DO UPDATE SET
      status = EXCLUDED.status,
      reason = EXCLUDED.reason,
      duplicate_of = EXCLUDED.duplicate_of,
      resource_version = EXCLUDED.resource_version,
      source = coalesce(inbox_events.source, EXCLUDED.source),
      reconcile_trigger = coalesce(inbox_events.reconcile_trigger, EXCLUDED.reconcile_trigger),
      -- The trace of the delivery that settles the row, as its log line and applied record have.
      trace_id = coalesce(EXCLUDED.trace_id, inbox_events.trace_id),
      updated_at = now()
    WHERE inbox_events.status IN ('received', 'retrying', 'dead_lettered')
    RETURNING 1
  ), state AS (
    INSERT INTO resource_state (${state.names})
    SELECT ${state.select}
    FROM ${state.from}
    ON CONFLICT (tenant_id, resource_type, resource_id) DO UPDATE SET
      version = EXCLUDED.version,
      deleted = EXCLUDED.deleted,
      data = EXCLUDED.data,
      last_event_id = EXCLUDED.last_event_id,
      source_partition = EXCLUDED.source_partition,
      last_occurred_at = EXCLUDED.last_occurred_at,
      updated_at = now()
    WHERE resource_state.ordered_by = EXCLUDED.ordered_by AND CASE WHEN EXCLUDED.ordered_by = 'version'
      THEN resource_state.version < EXCLUDED.version OR resource_state.version IS NULL
      ELSE resource_state.last_occurred_at < EXCLUDED.last_occurred_at OR resource_state.last_occurred_at IS NULL END
    RETURNING 1
  ), outbox AS (
    INSERT INTO applied_outbox (${outbox.names})
    SELECT ${outbox.select}
    FROM ${outbox.from}
    ORDER BY n
    RETURNING 1
  ), anomalies AS (
    INSERT INTO inbox_anomalies (
      event_id, body_sha256, original_body_sha256, payload, tenant_id, resource_type, resource_id,
      resource_version, source_topic, source_partition, source_offset, trace_id)
    SELECT r.event_id, r.body_sha256,
      (SELECT o.body_sha256 FROM inbox_events AS o WHERE o.tenant_id = r.tenant_id AND o.event_id = r.event_id),
      r.payload, r.tenant_id, r.resource_type, r.resource_id,
      r.resource_version, r.source_topic, r.source_partition, r.source_offset, r.trace_id
    FROM ${anomalies.from}
    ON CONFLICT (tenant_id, event_id, body_sha256) DO NOTHING
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM inbox)::int AS inbox_rows,
         (SELECT count(*) FROM state)::int AS state_rows,
         (SELECT count(*) FROM outbox)::int AS outbox_rows,
         (SELECT count(*) FROM anomalies)::int AS anomaly_rows`,
);

export interface ChunkWritten {
  inbox_rows: number;
  state_rows: number;
  outbox_rows: number;
  anomaly_rows: number;
}

/** Writes a chunk's effects; returns how many rows of each table were written, which the applier
 * checks against what it decided. */
export async function writeChunkEffects(client: Queryable, effects: ChunkEffects): Promise<ChunkWritten> {
  const { rows } = await client.query<ChunkWritten>({
    name: 'apply-write-effects',
    text: WRITE_CHUNK_EFFECTS.text,
    values: WRITE_CHUNK_EFFECTS.values(effects),
  });
  return rows[0]!;
}
