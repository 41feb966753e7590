import { resourceKey } from '#domain/contract/index.ts';
import { CommandFailed, UsageError } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { renderTable } from '../output.ts';
import { selectResourceAnomalies } from '#domain/store/anomalies.ts';
import { selectResourceEvents } from '#domain/store/inbox.ts';
import { selectAppliedRecords } from '#domain/store/outbox.ts';
import { selectResourceState } from '#domain/store/state.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export const traceCommand: CommandSpec = {
  path: ['trace'],
  summary: "one resource's current state and every event seen for it, newest first",
  usage: '<tenant> <resource_type> <resource_id>',
  details: [
    'Reads the database only: resource_state, inbox_events (status, version, reason, Kafka coordinates,',
    'times), body-mismatch anomalies and the applied records. Exit 1 when nothing is known about it.',
  ].join('\n'),
  examples: ['bridge trace tenant_acme theme thm_minimal-dark', 'bridge trace tenant_acme theme thm_minimal-dark --json'],
  options: {},
  positionals: true,
  mutating: false,
  async run(args, ctx) {
    if (args.positionals.length !== 3) throw new UsageError('trace expects <tenant> <resource_type> <resource_id>');
    const [tenant, type, id] = args.positionals as [string, string, string];
    const resource = { tenant_id: tenant, resource_type: type, resource_id: id };
    const pool = ctx.pool();
    const key = resourceKey({ tenant_id: tenant, resource: { type, id, version: 0 } });
    const [s, events, anomalies, applied] = await Promise.all([
      selectResourceState(pool, resource),
      selectResourceEvents(pool, resource),
      selectResourceAnomalies(pool, resource),
      selectAppliedRecords(pool, key),
    ]);
    if (!s && events.length === 0 && anomalies.length === 0) {
      throw new CommandFailed(`nothing known about ${key}: no state and no events`);
    }
    const stateOut = s
      ? {
          version: Number(s.version),
          deleted: s.deleted,
          data: s.data,
          last_event_id: s.last_event_id,
          created_at: iso(s.created_at),
          updated_at: iso(s.updated_at),
        }
      : null;
    const eventsOut = events.map((e) => ({
      event_id: e.event_id as string,
      event_type: e.event_type as string | null,
      status: e.status as string,
      version: e.resource_version === null ? null : Number(e.resource_version),
      reason: e.reason as string | null,
      attempts: e.attempts as number,
      delivery_attempt: e.delivery_attempt === null ? null : Number(e.delivery_attempt),
      last_error: e.last_error as string | null,
      duplicate_of: e.duplicate_of as string | null,
      idempotency_key: e.idempotency_key as string | null,
      body_sha256: e.body_sha256 as string,
      kafka:
        e.source_topic === null
          ? null
          : { topic: e.source_topic as string, partition: e.source_partition as number, offset: String(e.source_offset) },
      occurred_at: iso(e.occurred_at),
      received_at: iso(e.received_at),
      first_seen_at: iso(e.first_seen_at),
      updated_at: iso(e.updated_at),
    }));
    const anomaliesOut = anomalies.map((a) => ({
      event_id: a.event_id as string,
      kind: a.kind as string,
      status: a.status as string,
      version: a.resource_version === null ? null : Number(a.resource_version),
      body_sha256: a.body_sha256 as string,
      original_body_sha256: a.original_body_sha256 as string | null,
      kafka:
        a.source_topic === null
          ? null
          : { topic: a.source_topic as string, partition: a.source_partition as number, offset: String(a.source_offset) },
      detected_at: iso(a.detected_at),
    }));
    const appliedOut = applied.map((a) => ({ event_id: a.event_id, created_at: iso(a.created_at), published_at: iso(a.published_at) }));

    const lines = [
      `resource ${key}`,
      stateOut
        ? `state: version ${stateOut.version}${stateOut.deleted ? ' (deleted: tombstone)' : ''}, last event ${stateOut.last_event_id}, updated ${stateOut.updated_at}`
        : 'state: none',
      '',
      `events (${eventsOut.length}, newest first):`,
      renderTable(
        ['received', 'event_id', 'type', 'version', 'status', 'reason', 'attempts', 'delivery', 'kafka'],
        eventsOut.map((e) => [
          e.received_at ?? e.first_seen_at,
          e.event_id,
          e.event_type,
          e.version,
          e.status,
          e.duplicate_of ? `${e.reason ?? ''} of ${e.duplicate_of}` : (e.reason ?? e.last_error),
          e.attempts,
          e.delivery_attempt,
          e.kafka ? `${e.kafka.topic}/${e.kafka.partition}@${e.kafka.offset}` : null,
        ]),
      ),
    ];
    if (anomaliesOut.length > 0) {
      lines.push('', `anomalies (${anomaliesOut.length}: same event_id, different content):`);
      lines.push(
        renderTable(
          ['detected', 'event_id', 'version', 'status', 'kafka'],
          anomaliesOut.map((a) => [
            a.detected_at,
            a.event_id,
            a.version,
            a.status,
            a.kafka ? `${a.kafka.topic}/${a.kafka.partition}@${a.kafka.offset}` : null,
          ]),
        ),
      );
    }
    if (appliedOut.length > 0) {
      const unpublished = appliedOut.filter((a) => !a.published_at).length;
      lines.push('', `applied records: ${appliedOut.length}${unpublished ? ` (${unpublished} not yet published)` : ''}`);
    }
    ctx.out.result(
      { resource: { tenant_id: tenant, type, id, key }, state: stateOut, events: eventsOut, anomalies: anomaliesOut, applied: appliedOut },
      lines.join('\n'),
    );
  },
};
