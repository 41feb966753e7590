// resource_state: the current snapshot of each resource (written by the apply path: chunk.ts).
import type { Queryable } from './session.ts';

export interface ResourceRef {
  tenant_id: string;
  resource_type: string;
  resource_id: string;
}

/** The stored version of a resource; undefined when it is unknown. */
export async function selectResourceVersion(client: Queryable, resource: ResourceRef): Promise<number | undefined> {
  const { rows } = await client.query<{ version: string }>({
    text: `
      SELECT version FROM resource_state
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`,
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows[0] === undefined ? undefined : Number(rows[0].version);
}

export interface ResourceStateRow {
  /** bigint, as text. */
  version: string;
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
      SELECT version, deleted, data, last_event_id, created_at, updated_at
      FROM resource_state
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`,
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows[0];
}
