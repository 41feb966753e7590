import { describe, expect, it } from 'vitest';
import { keepRuns, ratio, spread } from './spread.ts';

describe('ratio', () => {
  it('divides, and is NaN when a side is missing or the denominator is not positive', () => {
    expect(ratio(90, 45)).toBe(2);
    expect(ratio(30, 60)).toBe(0.5);
    expect(ratio(NaN, 10)).toBeNaN();
    expect(ratio(10, NaN)).toBeNaN();
    expect(ratio(10, 0)).toBeNaN();
    expect(ratio(10, -1)).toBeNaN();
    expect(ratio(Infinity, 10)).toBeNaN();
  });
});

describe('spread', () => {
  it('gives min, median and max of an odd count', () => {
    expect(spread([2.4, 1.1, 1.8])).toEqual({ count: 3, min: 1.1, median: 1.8, max: 2.4 });
  });

  it('takes the mean of the two middle values for an even count', () => {
    expect(spread([4, 1, 3, 2])).toEqual({ count: 4, min: 1, median: 2.5, max: 4 });
  });

  it('ignores values that are not finite (a run that did not measure the rate)', () => {
    expect(spread([NaN, 3, Infinity, 1])).toEqual({ count: 2, min: 1, median: 2, max: 3 });
  });

  it('is NaN throughout with no values', () => {
    const s = spread([]);
    expect(s.count).toBe(0);
    expect(s.min).toBeNaN();
    expect(s.median).toBeNaN();
    expect(s.max).toBeNaN();
  });
});

describe('keepRuns', () => {
  it('appends the latest run and drops the oldest beyond the limit', () => {
    expect(keepRuns([1, 2], 3, 5)).toEqual([1, 2, 3]);
    expect(keepRuns([1, 2, 3], 4, 3)).toEqual([2, 3, 4]);
    expect(keepRuns([], 'a', 1)).toEqual(['a']);
  });

  it('refuses a limit below one', () => {
    expect(() => keepRuns([1], 2, 0)).toThrow(/at least 1/);
  });
});
