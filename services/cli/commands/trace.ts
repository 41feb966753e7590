import { CommandFailed, UsageError } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { renderTable } from '../output.ts';
import { resourceTrace } from '#domain/operations/trace.ts';

export const traceCommand: CommandSpec = {
  path: ['trace'],
  summary: "one resource's current state and every event seen for it, newest first",
  usage: '<tenant> <resource_type> <resource_id>',
  details: [
    'Reads the database only: resource_state, inbox_events (status, version, reason, Kafka coordinates,',
    'times, W3C trace id), body-mismatch anomalies and the applied records. Exit 1 when nothing is known',
    'about it. TRACE: the W3C trace id of the delivery that set the status (as in its log line); "-" when',
    'the event carried no traceparent and the worker traced nothing.',
  ].join('\n'),
  examples: ['bridge trace tenant_acme theme thm_minimal-dark', 'bridge trace tenant_acme theme thm_minimal-dark --json'],
  options: {},
  positionals: true,
  mutating: false,
  async run(args, ctx) {
    if (args.positionals.length !== 3) throw new UsageError('trace expects <tenant> <resource_type> <resource_id>');
    const [tenant, type, id] = args.positionals as [string, string, string];
    const resource = { tenant_id: tenant, resource_type: type, resource_id: id };
    const trace = await resourceTrace(ctx.pool(), resource);
    const key = trace.resource.key;
    if (!trace.known) throw new CommandFailed(`nothing known about ${key}: no state and no events`);
    const { state: stateOut, events: eventsOut, anomalies: anomaliesOut, applied: appliedOut } = trace;

    const lines = [
      `resource ${key}`,
      stateOut
        ? `state: ${stateOut.ordered_by === 'occurred_at' ? `ordered by occurred_at ${stateOut.last_occurred_at}, version ${stateOut.version ?? 'none'}` : `version ${stateOut.version}`}${stateOut.deleted ? ' (deleted: tombstone)' : ''}, last event ${stateOut.last_event_id}, updated ${stateOut.updated_at}`
        : 'state: none',
      '',
      `events (${eventsOut.length}, newest first):`,
      renderTable(
        ['received', 'event_id', 'type', 'version', 'status', 'reason', 'attempts', 'delivery', 'kafka', 'trace'],
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
          e.trace_id,
        ]),
      ),
    ];
    if (anomaliesOut.length > 0) {
      lines.push('', `anomalies (${anomaliesOut.length}: same event_id, different content):`);
      lines.push(
        renderTable(
          ['detected', 'event_id', 'version', 'status', 'kafka', 'trace'],
          anomaliesOut.map((a) => [
            a.detected_at,
            a.event_id,
            a.version,
            a.status,
            a.kafka ? `${a.kafka.topic}/${a.kafka.partition}@${a.kafka.offset}` : null,
            a.trace_id,
          ]),
        ),
      );
    }
    if (appliedOut.length > 0) {
      const unpublished = appliedOut.filter((a) => !a.published_at).length;
      lines.push('', `applied records: ${appliedOut.length}${unpublished ? ` (${unpublished} not yet published)` : ''}`);
    }
    ctx.out.result(
      { resource: trace.resource, state: stateOut, events: eventsOut, anomalies: anomaliesOut, applied: appliedOut },
      lines.join('\n'),
    );
  },
};
