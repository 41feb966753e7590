import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_FUTURE_SKEW_SECONDS, describeFutureOccurredAt, occurredAtTooFarAhead } from './occurred-at-bound.ts';

const received = new Date('2026-03-01T12:00:00.000Z');

describe('occurredAtTooFarAhead', () => {
  it('defaults to the signature tolerance: 300 s', () => {
    expect(DEFAULT_MAX_FUTURE_SKEW_SECONDS).toBe(300);
  });

  it('accepts a time in the past, now, and up to the bound ahead (the bound itself included)', () => {
    expect(occurredAtTooFarAhead('2020-01-01T00:00:00Z', received, 300)).toBeUndefined();
    expect(occurredAtTooFarAhead('2026-03-01T12:00:00Z', received, 300)).toBeUndefined();
    expect(occurredAtTooFarAhead('2026-03-01T12:04:59.999Z', received, 300)).toBeUndefined();
    expect(occurredAtTooFarAhead('2026-03-01T12:05:00Z', received, 300)).toBeUndefined();
  });

  it('refuses a time past the bound, by a millisecond or by decades', () => {
    expect(occurredAtTooFarAhead('2026-03-01T12:05:00.001Z', received, 300)).toEqual({
      occurredAt: '2026-03-01T12:05:00.001Z',
      reference: received,
      aheadSeconds: 301,
      boundSeconds: 300,
    });
    const year2062 = occurredAtTooFarAhead('2062-01-01T00:00:00Z', received, 300);
    expect(year2062?.aheadSeconds).toBe((Date.parse('2062-01-01T00:00:00Z') - received.getTime()) / 1000);
  });

  it('reads the offset: 13:00+02:00 is 11:00Z, behind the reference', () => {
    expect(occurredAtTooFarAhead('2026-03-01T13:00:00+02:00', received, 300)).toBeUndefined();
    expect(occurredAtTooFarAhead('2026-03-01T13:00:00-02:00', received, 300)?.aheadSeconds).toBe(3 * 3600);
  });

  it('judges with the bound it is given', () => {
    expect(occurredAtTooFarAhead('2026-03-01T12:30:00Z', received, 3600)).toBeUndefined();
    expect(occurredAtTooFarAhead('2026-03-01T12:30:00Z', received, 60)?.boundSeconds).toBe(60);
  });

  it('leaves a time it cannot read to the contract check (the envelope schema refuses it)', () => {
    expect(occurredAtTooFarAhead('not a time', received, 300)).toBeUndefined();
  });
});

describe('describeFutureOccurredAt', () => {
  it('says how far ahead, of what, and the bound: what the provider needs to act', () => {
    const ahead = occurredAtTooFarAhead('2062-01-01T00:00:00Z', received, 300)!;
    const text = describeFutureOccurredAt(ahead, 'the receiving clock');
    expect(text).toBe(
      `occurred_at 2062-01-01T00:00:00Z is ${ahead.aheadSeconds} s ahead of the receiving clock (2026-03-01T12:00:00.000Z); ` +
        'at most 300 s ahead is accepted',
    );
  });
});
