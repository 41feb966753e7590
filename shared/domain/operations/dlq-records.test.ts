import { describe, expect, it } from 'vitest';
import { encodeDeadLetterInfo } from '#domain/failures/index.ts';
import { filterEntries, latestPerEvent, parseDlqRef, REPLAYED_FROM_HEADER, replayMessage, toDlqEntry } from './dlq-records.ts';

function dlqMessage(offset: string, eventId: string | null, at: string, reason = 'retries_exhausted') {
  const dlqHeaders = encodeDeadLetterInfo({
    attempt: 5,
    firstFailureAt: new Date('2026-01-01T00:00:00Z'),
    lastErrorCode: '40001',
    lastErrorMessage: 'serialization failure',
    originalTopic: 'theme.events',
    originalPartition: 2,
    originalOffset: '17',
    reason,
    deadLetteredAt: new Date(at),
    failedTopic: 'theme.events.retry.4',
  });
  return {
    offset,
    key: Buffer.from('tenant_acme/theme/t1'),
    value: Buffer.from(eventId ? JSON.stringify({ event_id: eventId }) : 'not json'),
    timestamp: String(Date.parse(at)),
    attributes: 0,
    headers: { ...dlqHeaders, ...(eventId ? { 'event-id': Buffer.from(eventId) } : {}), source: Buffer.from('demo') },
  };
}

describe('DLQ records', () => {
  it('decodes the failures DLQ headers and the event id', () => {
    const e = toDlqEntry(1, dlqMessage('5', 'evt_1', '2026-01-02T00:00:00Z'));
    expect(e.eventId).toBe('evt_1');
    expect(e.info).toMatchObject({ reason: 'retries_exhausted', attempt: 5, originalPartition: 2, originalOffset: '17' });
    expect(e.problem).toBeNull();
  });

  it('replays with the original key, body and headers, failure headers removed, replayed-from added', () => {
    const m = dlqMessage('5', 'evt_1', '2026-01-02T00:00:00Z');
    const replay = replayMessage(toDlqEntry(1, m), 'theme.events.dlq');
    expect(replay.key).toEqual(m.key);
    expect(replay.value).toEqual(m.value);
    expect(Object.keys(replay.headers).sort()).toEqual(['event-id', REPLAYED_FROM_HEADER, 'source'].sort());
    expect(replay.headers[REPLAYED_FROM_HEADER]).toBe('theme.events.dlq:1:5');
  });

  it('an event dead-lettered twice is replayed once (the latest); records without an id are kept', () => {
    const entries = [
      toDlqEntry(0, dlqMessage('1', 'evt_1', '2026-01-02T00:00:00Z')),
      toDlqEntry(0, dlqMessage('2', 'evt_1', '2026-01-03T00:00:00Z')),
      toDlqEntry(1, dlqMessage('1', null, '2026-01-01T00:00:00Z', 'invalid_envelope')),
    ];
    expect(latestPerEvent(entries).map((e) => `${e.partition}:${e.offset}`)).toEqual(['1:1', '0:2']);
    expect(filterEntries(entries, { reason: 'invalid_envelope' })).toHaveLength(1);
    expect(filterEntries(entries, { since: Date.parse('2026-01-02T12:00:00Z') }).map((e) => e.offset)).toEqual(['2']);
  });

  it('parses refs: partition:offset or an event id', () => {
    expect(parseDlqRef('3:1042')).toEqual({ kind: 'coordinates', partition: 3, offset: '1042' });
    expect(parseDlqRef('evt_3:x')).toEqual({ kind: 'event', eventId: 'evt_3:x' });
  });
});
