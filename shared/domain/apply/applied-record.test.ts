import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { eventAction, resourceKey, sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';
import { buildAppliedRecord, serializeAppliedRecord } from './applied-record.ts';
import type { ParsedEvent } from './types.ts';

function parsed(envelope: EventEnvelope): ParsedEvent {
  return {
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
  it('is byte for byte JSON.stringify(buildAppliedRecord(...)), upserts and deletes', () => {
    const appliedAt = new Date('2026-11-30T01:02:03.456Z');
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
        fc.nat(),
        fc.boolean(),
        (eventId, name, version, isDelete) => {
          const envelope = sampleThemeEvent({
            event_id: eventId,
            resource: { id: 'theme_x', version },
            ...(isDelete ? { event_type: 'theme.deleted', data: undefined } : {}),
          });
          if (!isDelete) envelope.data = { ...envelope.data!, name };
          const event = parsed(envelope);
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
