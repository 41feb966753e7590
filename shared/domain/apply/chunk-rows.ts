// The rows one chunk writes, built from its decisions: the apply path hands them to the store's
// chunk statement (writeChunkEffects), and bench/worker/copy-ceiling.ts COPYs the very same rows,
// so the ceiling never measures rows the worker does not write.
import type { TraceHeaders } from '#plumbing/observability/tracing.ts';
import type { ChunkEffects } from '#domain/store/chunk.ts';
import { formatMicros } from '#domain/contract/occurred-at.ts';
import { receivedAtHeader, reconcileTriggerHeader, sourceHeader, traceIdHeader, traceIdOf } from '#domain/contract/event-headers.ts';
import { serializeAppliedRecord } from './applied-record.ts';
import type { Decision } from './decide.ts';
import type { SourceRecord } from './types.ts';

export interface ChunkRowsOptions {
  /** The applied_at of every applied record in the chunk (ISO 8601). */
  appliedAtIso: string;
  /** Each record's apply span context (tracing on); the outbox row carries it on to the relay. */
  traces?: Map<SourceRecord, TraceHeaders> | undefined;
}

/**
 * The chunk's rows, in decision order: an inbox row per decision that writes one, the last applied
 * version of each resource, an outbox row per applied event, an anomaly row per quarantined one.
 */
export function chunkRows(decisions: readonly Decision[], options: ChunkRowsOptions): ChunkEffects {
  const { appliedAtIso, traces } = options;
  const inboxRows = decisions.filter((d) => d.writeInbox);
  // Only the last applied version of each resource in the chunk reaches the table.
  const lastApplied = new Map<string, Decision>();
  for (const d of decisions) if (d.outcome === 'applied') lastApplied.set(d.event.resourceKey, d);
  const stateRows = [...lastApplied.values()];
  const outboxRows = decisions.filter((d) => d.outcome === 'applied');
  const anomalyRows = decisions.filter((d) => d.outcome === 'quarantined');
  const env = (d: Decision) => d.event.envelope;
  // The delivery's trace for the operator views: its apply span's (tracing on), else its header's.
  const traceId = (d: Decision) => traceIdOf(traces?.get(d.event.record)?.traceparent) ?? traceIdHeader(d.event.record.headers);
  // Each applied snapshot is serialised once: the state row and the applied record share it.
  const dataJson = new Map<Decision, string | null>();
  for (const d of outboxRows) dataJson.set(d, d.event.action === 'delete' ? null : JSON.stringify(env(d).data ?? {}));

  return {
    inbox: inboxRows.map((d) => ({
      event_id: env(d).event_id,
      idempotency_key: env(d).idempotency_key,
      duplicate_of: d.duplicateOf,
      tenant_id: env(d).tenant_id,
      resource_type: env(d).resource.type,
      resource_id: env(d).resource.id,
      resource_version: env(d).resource.version,
      event_type: env(d).event_type,
      status: d.outcome,
      reason: d.reason,
      body_sha256: d.event.bodySha256,
      source_topic: d.event.record.topic,
      source_partition: d.event.record.partition,
      source_offset: d.event.record.offset,
      occurred_at: env(d).occurred_at,
      received_at: receivedAt(d.event.record),
      delivery_attempt: d.event.deliveryAttempt,
      source: sourceHeader(d.event.record.headers),
      reconcile_trigger: reconcileTriggerHeader(d.event.record.headers),
      trace_id: traceId(d),
      payload: d.event.bytes,
    })),
    state: stateRows.map((d) => ({
      tenant_id: env(d).tenant_id,
      resource_type: env(d).resource.type,
      resource_id: env(d).resource.id,
      version: env(d).resource.version,
      deleted: d.event.action === 'delete',
      last_event_id: env(d).event_id,
      source_partition: d.event.record.partition,
      data: dataJson.get(d)!,
      last_occurred_at: d.event.occurredAtMicros === undefined ? null : formatMicros(d.event.occurredAtMicros),
      ordered_by: d.event.orderedBy,
    })),
    outbox: outboxRows.map((d) => ({
      event_id: env(d).event_id,
      key: d.event.resourceKey,
      source_topic: d.event.record.topic,
      source_partition: d.event.record.partition,
      source_offset: d.event.record.offset,
      // Serialised once here; the relay publishes these exact bytes, so any republish is identical.
      payload: serializeAppliedRecord(d.event, appliedAtIso, dataJson.get(d)!),
      traceparent: traces?.get(d.event.record)?.traceparent,
      tracestate: traces?.get(d.event.record)?.tracestate,
    })),
    anomalies: anomalyRows.map((d) => ({
      event_id: env(d).event_id,
      body_sha256: d.event.bodySha256,
      payload: d.event.bytes.toString('utf8'),
      tenant_id: env(d).tenant_id,
      resource_type: env(d).resource.type,
      resource_id: env(d).resource.id,
      resource_version: env(d).resource.version,
      source_topic: d.event.record.topic,
      source_partition: d.event.record.partition,
      source_offset: d.event.record.offset,
      trace_id: traceId(d),
    })),
  };
}

/** When the ingress received the delivery (its header), else the Kafka record's timestamp. */
function receivedAt(record: SourceRecord): string | null {
  const header = receivedAtHeader(record.headers);
  if (header !== undefined) return header.toISOString();
  if (record.timestamp !== undefined && /^\d+$/.test(record.timestamp)) return new Date(Number(record.timestamp)).toISOString();
  return null;
}
