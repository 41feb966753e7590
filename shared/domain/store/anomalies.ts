// inbox_anomalies: an event_id seen again with other content (written by the apply path: chunk.ts).
import type { Queryable } from './session.ts';
import type { ResourceRef } from './state.ts';

/** The failure path sent a quarantined event to the DLQ. */
export async function markAnomalyDeadLettered(
  client: Queryable,
  anomaly: { tenant_id: string; event_id: string; body_sha256: string },
): Promise<void> {
  await client.query({
    text: `
      UPDATE inbox_anomalies SET status = 'dead_lettered', updated_at = now()
      WHERE tenant_id = $1 AND event_id = $2 AND body_sha256 = $3 AND status = 'quarantined'`,
    values: [anomaly.tenant_id, anomaly.event_id, anomaly.body_sha256],
  });
}

export interface ResourceAnomalyRow {
  event_id: string;
  kind: string;
  status: string;
  /** bigint, as text. */
  resource_version: string | null;
  body_sha256: string;
  original_body_sha256: string | null;
  source_topic: string | null;
  source_partition: number | null;
  source_offset: string | null;
  detected_at: Date;
  /** The W3C trace id of the quarantined delivery (null: none, or older than migration 0009). */
  trace_id: string | null;
}

/** One resource's anomalies, newest first (bridge trace). */
export async function selectResourceAnomalies(client: Queryable, resource: ResourceRef): Promise<ResourceAnomalyRow[]> {
  const { rows } = await client.query<ResourceAnomalyRow>({
    text: `
      SELECT event_id, kind, status, resource_version, body_sha256, original_body_sha256,
             source_topic, source_partition, source_offset, detected_at, trace_id
      FROM inbox_anomalies
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3
      ORDER BY detected_at DESC, id DESC`,
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows;
}
