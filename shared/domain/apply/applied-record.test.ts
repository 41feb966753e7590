import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  appliedRecordSchema,
  eventAction,
  resourceKey,
  sampleThemeEvent,
  type EventEnvelope,
  type ReceivedEnvelope,
} from '#domain/contract/index.ts';
import { Kafka, type KafkaEvent, type KafkaMessage } from 'cloudevents';
import {
  appliedHeaders,
  buildAppliedRecord,
  cloudEventHeaders,
  CLOUDEVENTS_SOURCE_PREFIX,
  serializeAppliedRecord,
} from './applied-record.ts';
import type { ParsedEvent } from './types.ts';

function parsed(envelope: ReceivedEnvelope, orderedBy: ParsedEvent['orderedBy'] = 'version'): ParsedEvent {
  return {
    orderedBy,
    record: { topic: 't', partition: 0, offset: '0', key: null, value: null },
    envelope,
    bodySha256: 'sha',
    bytes: Buffer.from(JSON.stringify(envelope)),
    deliveryAttempt: undefined,
    resourceKey: resourceKey(envelope),
    action: eventAction(envelope),
  };
}

describe('serializeAppliedRecord', () => {
  it('is byte for byte JSON.stringify(buildAppliedRecord(...)), upserts and deletes, by version or by occurred_at', () => {
    const appliedAt = new Date('2026-11-30T01:02:03.456Z');
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
        fc.nat(),
        fc.boolean(),
        fc.constantFrom('version', 'occurred_at with a version', 'occurred_at without one'),
        (eventId, name, version, isDelete, ordering) => {
          const envelope: ReceivedEnvelope = sampleThemeEvent({
            event_id: eventId,
            resource: { id: 'theme_x', version },
            ...(isDelete ? { event_type: 'theme.deleted', data: undefined } : {}),
          });
          if (!isDelete) envelope.data = { ...envelope.data!, name };
          if (ordering === 'occurred_at without one') delete envelope.resource.version;
          const event = parsed(envelope, ordering === 'version' ? 'version' : 'occurred_at');
          const dataJson = isDelete ? null : JSON.stringify(envelope.data ?? {});
          expect(serializeAppliedRecord(event, appliedAt.toISOString(), dataJson)).toBe(
            JSON.stringify(buildAppliedRecord(event, appliedAt)),
          );
        },
      ),
      { seed: 5, numRuns: 300 },
    );
  });
});

describe('CloudEvents headers of an applied record (Kafka binding, binary content mode)', () => {
  const appliedAt = '2026-12-01T10:00:00.000Z';
  const record = (envelope: EventEnvelope) => {
    const event = parsed(envelope);
    const value = serializeAppliedRecord(event, appliedAt, event.action === 'delete' ? null : JSON.stringify(envelope.data ?? {}));
    const headers = appliedHeaders({
      eventId: envelope.event_id,
      topic: 'theme.events',
      partition: 3,
      offset: '42',
      key: event.resourceKey,
      payload: value,
    });
    return { key: event.resourceKey, value, headers };
  };

  it('a CloudEvents SDK reads the record as an event: id, source, type, subject, time, data', () => {
    const envelope = sampleThemeEvent({ event_type: 'theme.created', occurred_at: '2026-11-30T23:59:59+07:00' });
    const message = record(envelope);
    const event = Kafka.toEvent({ ...message, body: undefined } as KafkaMessage<string>) as KafkaEvent<unknown>;
    expect(event.specversion).toBe('1.0');
    expect(event.id).toBe(envelope.event_id);
    expect(event.source).toBe(`${CLOUDEVENTS_SOURCE_PREFIX}tenant_acme`);
    expect(event.type).toBe('theme.upserted');
    expect(event.subject).toBe(`tenant_acme/theme/${envelope.resource.id}`);
    expect(new Date(event.time!).toISOString()).toBe('2026-11-30T16:59:59.000Z');
    expect(event.datacontenttype).toBe('application/json');
    expect(event.data).toEqual(JSON.parse(message.value));
    // Our own headers stay beside them.
    expect(message.headers['event-id']).toBe(envelope.event_id);
  });

  it('a delete is <type>.deleted', () => {
    const message = record(sampleThemeEvent({ event_type: 'theme.deleted' }));
    expect(message.headers.ce_type).toBe('theme.deleted');
  });

  it('finds the action and the time whatever strings the data holds', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.string()), fc.constantFrom('created', 'updated'), (data, verb) => {
        const envelope = sampleThemeEvent({
          event_type: `theme.${verb}`,
          data: { ...data, note: '","action":"delete","occurred_at":"x"}' },
        });
        const { headers } = record(envelope);
        return headers.ce_type === 'theme.upserted' && headers.ce_time === envelope.occurred_at;
      }),
      { numRuns: 200 },
    );
  });

  it('leaves them out for a value of another shape', () => {
    expect(cloudEventHeaders('tenant_acme/theme/x', 'evt_1', '{"hello":"world"}')).toBeUndefined();
  });
});

describe('the applied record contract (appliedRecordSchema, the JSON Schema and AsyncAPI source)', () => {
  it('every record the apply path writes conforms, upserts and deletes', () => {
    for (const envelope of [sampleThemeEvent(), sampleThemeEvent({ event_type: 'theme.deleted', data: {} })]) {
      const event = parsed(envelope);
      const bytes = serializeAppliedRecord(
        event,
        '2026-12-01T10:00:00.000Z',
        event.action === 'delete' ? null : JSON.stringify(envelope.data),
      );
      expect(appliedRecordSchema.safeParse(JSON.parse(bytes)).success).toBe(true);
    }
    expect(appliedRecordSchema.safeParse({ event_id: 'e' }).success).toBe(false);
  });

  it('says what ordered a change by occurred_at, and leaves out a version the event did not carry', () => {
    const envelope: ReceivedEnvelope = sampleThemeEvent({ resource: { id: 'theme_t' } });
    delete envelope.resource.version;
    const bytes = serializeAppliedRecord(parsed(envelope, 'occurred_at'), '2026-12-01T10:00:00.000Z', JSON.stringify(envelope.data));
    const value = JSON.parse(bytes) as Record<string, unknown>;
    expect(value).toMatchObject({
      resource: { type: 'theme', id: 'theme_t' },
      ordered_by: 'occurred_at',
      occurred_at: envelope.occurred_at,
    });
    expect(value.resource).not.toHaveProperty('version');
    expect(appliedRecordSchema.safeParse(value).success).toBe(true);
    // Ordered by version: the record is exactly what it always was, without ordered_by.
    expect(serializeAppliedRecord(parsed(sampleThemeEvent()), '2026-12-01T10:00:00.000Z', '{}')).not.toContain('ordered_by');
    expect(cloudEventHeaders('tenant_acme/theme/theme_t', envelope.event_id, bytes)).toMatchObject({ ce_time: envelope.occurred_at });
  });
});
