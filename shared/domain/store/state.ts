// resource_state: the current snapshot of each resource (written by the apply path: chunk.ts).
import type { Queryable } from './session.ts';

export interface ResourceRef {
  tenant_id: string;
  resource_type: string;
  resource_id: string;
}

/** The stored version of a resource; undefined when it is unknown or has none (ordered by occurred_at). */
export async function selectResourceVersion(client: Queryable, resource: ResourceRef): Promise<number | undefined> {
  const { rows } = await client.query<{ version: string | null }>({
    text: `
      SELECT version FROM resource_state
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`,
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows[0]?.version == null ? undefined : Number(rows[0].version);
}

export interface ResourceStateRow {
  /** bigint, as text; null when ordered by occurred_at from events without a version. */
  version: string | null;
  /** The occurred_at that ordered the row, in microseconds as text (exact); null: ordered by version. */
  last_occurred_us: string | null;
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
        deleted, data, last_event_id, created_at, updated_at
      FROM resource_state
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`,
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows[0];
}
