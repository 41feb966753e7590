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

