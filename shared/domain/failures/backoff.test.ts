import { describe, expect, it } from 'vitest';
import { defaultRetrySchedule, probeDelayMs, retryDelayMs } from './backoff.ts';

describe('retryDelayMs', () => {
  it('defaults to 5 s, 30 s, 2 min, 10 min', () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 4].map((l) => retryDelayMs(defaultRetrySchedule, l, mid))).toEqual([5_000, 30_000, 120_000, 600_000]);
  });

  it('stays within ±20% jitter', () => {
    expect(retryDelayMs(defaultRetrySchedule, 2, () => 0)).toBe(24_000);
    expect(retryDelayMs(defaultRetrySchedule, 2, () => 0.999999)).toBe(36_000);
    for (let i = 0; i < 200; i += 1) {
      const d = retryDelayMs(defaultRetrySchedule, 1);
      expect(d).toBeGreaterThanOrEqual(4_000);
      expect(d).toBeLessThanOrEqual(6_000);
    }
  });

  it('reuses the last delay past the end and rejects level 0', () => {
    expect(retryDelayMs({ delaysMs: [100, 200], jitter: 0 }, 5)).toBe(200);
    expect(() => retryDelayMs(defaultRetrySchedule, 0)).toThrow(RangeError);
  });
});

describe('probeDelayMs', () => {
  it('doubles from 250 ms and caps at 10 s', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((a) => probeDelayMs(a, 250, 10_000))).toEqual([250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
  });
});
