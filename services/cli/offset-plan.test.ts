import { describe, expect, it } from 'vitest';
import { UsageError } from './args.ts';
import { groupIsInactive, parseResetTarget, planReset } from './offset-plan.ts';

const watermarks = [
  { partition: 1, low: '5', high: '20' },
  { partition: 0, low: '0', high: '10' },
];

describe('parseResetTarget', () => {
  it.each([
    ['earliest', { kind: 'earliest' }],
    ['latest', { kind: 'latest' }],
    ['42', { kind: 'offset', offset: 42n }],
    ['2026-01-31T12:00:00Z', { kind: 'time', timestamp: Date.parse('2026-01-31T12:00:00Z') }],
    ['2026-01-31T19:00:00+07:00', { kind: 'time', timestamp: Date.parse('2026-01-31T12:00:00Z') }],
  ])('%s', (input, expected) => {
    expect(parseResetTarget(input)).toEqual(expected);
  });

  it.each(['2026-01-31', '2026-01-31T12:00'])('refuses %s (no UTC offset) naming the fix', (input) => {
    expect(() => parseResetTarget(input)).toThrow(/^--to 2026-01-31\S* has no UTC offset: add Z for UTC/);
  });

  it.each(['', 'now', '-1', '12abc', '2026-13-45T99:00:00Z', 'yesterday'])('rejects %j as a usage error', (input) => {
    expect(() => parseResetTarget(input)).toThrow(UsageError);
  });
});

describe('planReset', () => {
  const committed = new Map<number, string | null>([
    [0, '7'],
    [1, '-1'],
  ]);

  it('earliest and latest use each partition watermark, sorted by partition', () => {
    expect(planReset({ target: { kind: 'earliest' }, watermarks, committed }).map((r) => [r.partition, r.current, r.target])).toEqual([
      [0, '7', '0'],
      [1, null, '5'],
    ]);
    expect(planReset({ target: { kind: 'latest' }, watermarks, committed }).map((r) => r.target)).toEqual(['10', '20']);
  });

  it('clamps an explicit offset into [low, high] and says so', () => {
    const rows = planReset({ target: { kind: 'offset', offset: 3n }, watermarks, committed });
    expect(rows.map((r) => [r.target, r.clamped])).toEqual([
      ['3', false],
      ['5', true],
    ]);
    expect(planReset({ target: { kind: 'offset', offset: 99n }, watermarks, committed }).map((r) => r.target)).toEqual(['10', '20']);
  });

  it('a time target uses the offsets found by timestamp, high when none is newer', () => {
    const byTimestamp = new Map([
      [0, '4'],
      [1, '-1'],
    ]);
    expect(planReset({ target: { kind: 'time', timestamp: 0 }, watermarks, committed, byTimestamp }).map((r) => r.target)).toEqual([
      '4',
      '20',
    ]);
  });
});

describe('groupIsInactive', () => {
  it.each([
    ['Empty', true],
    ['Dead', true],
    ['Stable', false],
    ['PreparingRebalance', false],
    ['CompletingRebalance', false],
  ])('%s -> %s', (state, expected) => {
    expect(groupIsInactive(state)).toBe(expected);
  });
});
