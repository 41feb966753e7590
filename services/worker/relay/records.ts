// What one outbox row becomes on the applied topic: its stored bytes and key, the headers derived
// from its source position, and (when tracing) a producer span that continues its apply span.
import { appliedHeaders } from '#domain/apply/index.ts';
import type { OutboxRow } from '#domain/store/outbox.ts';
import { SpanKind, type Span, type Tracing } from '#plumbing/observability/tracing.ts';

export function appliedMessages(rows: readonly OutboxRow[]) {
  return rows.map((r) => ({
    key: r.key,
    value: r.payload,
    headers: appliedHeaders({
      eventId: r.event_id,
      topic: r.source_topic,
      partition: r.source_partition,
      offset: r.source_offset,
      key: r.key,
      payload: r.payload,
      traceparent: r.traceparent,
      tracestate: r.tracestate,
    }),
  }));
}

/** One producer span per row, child of its apply span (the context stored with the row). */
export function startPublishSpans(tracing: Tracing, topic: string, rows: readonly OutboxRow[]): Span[] {
  return rows.map((r) =>
    tracing.startSpan(
      `send ${topic}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: {
          'messaging.system': 'kafka',
          'messaging.operation.type': 'send',
          'messaging.destination.name': topic,
          'bridge.event_id': r.event_id,
        },
      },
      tracing.extract({ traceparent: r.traceparent ?? undefined, tracestate: r.tracestate ?? undefined }),
    ),
  );
}
