import { describe, expect, it } from 'vitest';
import { parseIsoTime, parsePosition, UsageError } from './args.ts';

describe('parseIsoTime: an instant needs an explicit UTC offset', () => {
  it.each([
    ['2026-01-31T12:00:00Z', Date.UTC(2026, 0, 31, 12)],
    ['2026-01-31T12:00Z', Date.UTC(2026, 0, 31, 12)],
    ['2026-01-31t12:00:00z', Date.UTC(2026, 0, 31, 12)],
    ['2026-01-31T12:00:00.250Z', Date.UTC(2026, 0, 31, 12, 0, 0, 250)],
    ['2026-01-31T19:00:00+07:00', Date.UTC(2026, 0, 31, 12)],
    ['2026-01-31T07:00-05:00', Date.UTC(2026, 0, 31, 12)],
    ['2026-01-31T12:00:00+00:00', Date.UTC(2026, 0, 31, 12)],
  ])('%s is an exact instant', (text, ms) => {
    expect(parseIsoTime(text, 'since')).toBe(ms);
  });

  // Date.parse reads these as the machine's local time (or, for a date alone, as UTC midnight):
  // an operator on a laptop in another zone would select the wrong hours without noticing.
  it.each(['2026-01-31T12:00', '2026-01-31T12:00:00', '2026-01-31T12:00:00.5', '2026-01-31'])(
    '%s (no offset) is a usage error naming the fix',
    (text) => {
      let error: unknown;
      try {
        parseIsoTime(text, 'since');
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(UsageError);
      const message = (error as Error).message;
      expect(message).toMatch(/^--since .* has no UTC offset/);
      expect(message).toMatch(/add Z for UTC/);
      expect(message).toMatch(/\+07:00/);
    },
  );

  it.each([
    '2026-02-30T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-01-31T24:00:00Z',
    '2026-01-31T12:60:00Z',
    '2026-01-31T12:00:00+25:00',
    '2026-01-31T12:00:00 Z',
    '2026-01-31T12Z',
  ])('%s is not a valid time (undefined, the caller says why)', (text) => {
    expect(parseIsoTime(text, 'since')).toBeUndefined();
  });

  it.each(['', 'yesterday', '1200', 'last week'])('%j does not look like a time', (text) => {
    expect(parseIsoTime(text, 'since')).toBeUndefined();
  });
});

describe('parsePosition', () => {
  it('takes an offset or an instant with an offset', () => {
    expect(parsePosition('1200', 'from')).toEqual({ kind: 'offset', offset: 1200n });
    expect(parsePosition('2026-01-31T12:00:00Z', 'from')).toEqual({ kind: 'time', timestamp: Date.UTC(2026, 0, 31, 12) });
  });

  it('refuses a local time', () => {
    expect(() => parsePosition('2026-01-31T12:00', 'from-time')).toThrow(/^--from-time 2026-01-31T12:00 has no UTC offset/);
  });
});
