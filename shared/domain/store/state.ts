// resource_state: the current snapshot of each resource (written by the apply path: chunk.ts).
import type { Queryable } from './session.ts';

export type ResourceOrdering = 'version' | 'occurred_at';

export interface ResourceRef {
  tenant_id: string;
  resource_type: string;
  resource_id: string;
}

/**
 * The stored version of a resource ordered by version; undefined when it is unknown, has none, or
 * is ordered by occurred_at (a version it carries then orders nothing, so no event is stale by it).
 */
export async function selectResourceVersion(client: Queryable, resource: ResourceRef): Promise<number | undefined> {
  const { rows } = await client.query<{ version: string | null }>({
    text: `
      SELECT version FROM resource_state
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3 AND ordered_by = 'version'`,
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows[0]?.version == null ? undefined : Number(rows[0].version);
}

export interface ResourceStateRow {
  /** bigint, as text; null when ordered by occurred_at from events without a version. */
  version: string | null;
  /** The occurred_at that ordered the row, in microseconds as text (exact); null: none known. */
  last_occurred_us: string | null;
  /** What orders the row: only events of this ordering apply to it (`bridge ordering switch` changes it). */
  ordered_by: ResourceOrdering;
  deleted: boolean;
  data: unknown;
  last_event_id: string;
  created_at: Date;
  updated_at: Date;
}

/** One resource's state row (bridge trace). */
export async function selectResourceState(client: Queryable, resource: ResourceRef): Promise<ResourceStateRow | undefined> {
  const { rows } = await client.query<ResourceStateRow>({
    text: `
      SELECT version, (extract(epoch FROM last_occurred_at) * 1000000)::bigint::text AS last_occurred_us,
        ordered_by, deleted, data, last_event_id, created_at, updated_at
      FROM resource_state
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`,
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows[0];
}

// --- switching a resource type's ordering (bridge ordering switch) -------------------------------

/** The rows a switch would change, and of those the ones left without the new ordering's key. */
export interface OrderingSwitchCount {
  /** Rows of the type (and tenant) ordered the other way now. */
  rows: number;
  /** Of those, rows that end without the new ordering's key: no version, or no known occurred_at. */
  without_key: number;
}

/**
 * Blocks every apply transaction's write to resource_state until COMMIT, and waits for those in
 * flight to commit: the one lock that serialises a bulk switch against every applier (the
 * appliers' per-resource advisory locks would need one lock-table slot per row). SHARE ROW
 * EXCLUSIVE conflicts with the appliers' writes (ROW EXCLUSIVE) but not with their reads, so an
 * applier that read a row before the switch and writes after finds the chunk statement's ordering
 * guard refusing it and retries, deciding against the switched row.
 */
export async function lockStateForSwitch(client: Queryable, lockTimeoutMs: number): Promise<void> {
  await client.query({ text: `SET LOCAL lock_timeout = ${Math.trunc(lockTimeoutMs)}` });
  await client.query({ text: 'LOCK TABLE resource_state IN SHARE ROW EXCLUSIVE MODE' });
}

// $1 type, $2 tenant (null: every tenant), $3 the ordering switched to.
const SWITCH_SCOPE = `resource_type = $1 AND ($2::text IS NULL OR tenant_id = $2) AND ordered_by <> $3`;

// A time-ordered row keeps the time of its last applied event: the inbox row of last_event_id
// (what that event said), else what the row kept from an earlier time ordering, else none.
const SEEDED_OCCURRED_AT = `coalesce(
  (SELECT i.occurred_at FROM inbox_events AS i WHERE i.tenant_id = s.tenant_id AND i.event_id = s.last_event_id),
  s.last_occurred_at)`;

/** What switchResourceOrdering would change now (the dry run; no lock). */
export async function countOrderingSwitch(
  client: Queryable,
  args: { type: string; tenant: string | null; to: ResourceOrdering },
): Promise<OrderingSwitchCount> {
  const { rows } = await client.query<OrderingSwitchCount>({
    text: `
      SELECT count(*)::int AS rows,
        count(*) FILTER (WHERE CASE WHEN $3 = 'version' THEN s.version IS NULL ELSE ${SEEDED_OCCURRED_AT} IS NULL END)::int AS without_key
      FROM resource_state AS s
      WHERE ${SWITCH_SCOPE}`,
    values: [args.type, args.tenant, args.to],
  });
  return rows[0]!;
}

/**
 * Re-stamps the rows of a type (one tenant, or all) with the other ordering, inside the caller's
 * transaction (after lockStateForSwitch). To occurred_at: last_occurred_at is seeded from the last
 * applied event, so a late event older than it stays stale. To version: the stored version stays
 * (NULL for a row that never had one: its first versioned event applies); last_occurred_at stays
 * too, unread while the row is ordered by version.
 */
export async function switchResourceOrdering(
  client: Queryable,
  args: { type: string; tenant: string | null; to: ResourceOrdering },
): Promise<OrderingSwitchCount> {
  const { rows } = await client.query<OrderingSwitchCount>({
    text: `
      WITH switched AS (
        UPDATE resource_state AS s SET
          ordered_by = $3,
          last_occurred_at = CASE WHEN $3 = 'occurred_at' THEN ${SEEDED_OCCURRED_AT} ELSE s.last_occurred_at END,
          updated_at = now()
        WHERE ${SWITCH_SCOPE}
        RETURNING CASE WHEN $3 = 'version' THEN s.version IS NULL ELSE s.last_occurred_at IS NULL END AS without_key
      )
      SELECT count(*)::int AS rows, count(*) FILTER (WHERE without_key)::int AS without_key FROM switched`,
    values: [args.type, args.tenant, args.to],
  });
  return rows[0]!;
}
