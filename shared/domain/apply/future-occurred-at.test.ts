import { describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { futureOccurredAtFailure } from './future-occurred-at.ts';
import type { SourceRecord } from './types.ts';

const RECEIVED = '2026-03-01T12:00:00.000Z';
const at = (seconds: number) => new Date(Date.parse(RECEIVED) + seconds * 1000).toISOString();

function record(headers: Record<string, string>, timestamp?: string): SourceRecord {
  return { topic: 't', partition: 0, offset: '0', key: null, value: null, headers, ...(timestamp === undefined ? {} : { timestamp }) };
}

describe('futureOccurredAtFailure', () => {
  it('passes an occurred_at up to the default bound (300 s) ahead of received-at', () => {
    expect(futureOccurredAtFailure(record({ 'received-at': RECEIVED }), sampleThemeEvent({ occurred_at: at(300) }))).toBeUndefined();
    expect(futureOccurredAtFailure(record({ 'received-at': RECEIVED }), sampleThemeEvent({ occurred_at: at(-3600) }))).toBeUndefined();
  });

  it('fails one further ahead: permanent, with a code of its own and both times in the message', () => {
    const failure = futureOccurredAtFailure(record({ 'received-at': RECEIVED }), sampleThemeEvent({ occurred_at: '2062-01-01T00:00:00Z' }));
    expect(failure?.code).toBe('occurred_at_in_future');
    expect(failure?.retryable).toBe(false);
    expect(failure?.message).toMatch(
      /^occurred_at 2062-01-01T00:00:00Z is \d+ s ahead of received-at \(2026-03-01T12:00:00.000Z\); at most 300 s/,
    );
  });

  it('judges by the bound the ingress wrote on the record, capped at a week', () => {
    const wide = record({ 'received-at': RECEIVED, 'max-future-skew': '3600' });
    expect(futureOccurredAtFailure(wide, sampleThemeEvent({ occurred_at: at(3600) }))).toBeUndefined();
    expect(futureOccurredAtFailure(wide, sampleThemeEvent({ occurred_at: at(3601) }))?.message).toContain('at most 3600 s');
    const huge = record({ 'received-at': RECEIVED, 'max-future-skew': '999999999' });
    expect(futureOccurredAtFailure(huge, sampleThemeEvent({ occurred_at: '2062-01-01T00:00:00Z' }))?.message).toContain('at most 604800 s');
    // A malformed bound is no bound of the ingress's: the default applies.
    const malformed = record({ 'received-at': RECEIVED, 'max-future-skew': '1e9' });
    expect(futureOccurredAtFailure(malformed, sampleThemeEvent({ occurred_at: at(301) }))?.message).toContain('at most 300 s');
  });

  it('without received-at, compares with the record timestamp; without either, does not judge', () => {
    const stamped = record({}, String(Date.parse(RECEIVED)));
    expect(futureOccurredAtFailure(stamped, sampleThemeEvent({ occurred_at: at(301) }))?.code).toBe('occurred_at_in_future');
    expect(futureOccurredAtFailure(stamped, sampleThemeEvent({ occurred_at: at(299) }))).toBeUndefined();
    expect(futureOccurredAtFailure(record({}), sampleThemeEvent({ occurred_at: '2062-01-01T00:00:00Z' }))).toBeUndefined();
  });
});
