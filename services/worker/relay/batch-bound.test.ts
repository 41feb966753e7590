import { describe, expect, it } from 'vitest';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { fittingPrefix, recordBytesAtMost } from './batch-bound.ts';

const keyOn = (partition: number, count: number): string => {
  for (let i = 0; ; i += 1) if (partitionForKey(`k${i}`, count) === partition) return `k${i}`;
};
const message = (key: string, size: number) => ({ key, value: 'x'.repeat(size), headers: { h: 'v' } });

describe('fittingPrefix', () => {
  it('bounds each partition, not the batch (regression: a relay batch of one long partition run was refused as too large)', () => {
    const a = keyOn(0, 12);
    const b = keyOn(1, 12);
    const size = recordBytesAtMost(message(a, 1000));
    const messages = [...Array.from({ length: 5 }, () => message(a, 1000)), ...Array.from({ length: 5 }, () => message(b, 1000))];
    expect(fittingPrefix(messages, 12, size * 5)).toBe(10);
    expect(fittingPrefix(messages, 12, size * 3)).toBe(3);
  });

  it('always takes the first record of a partition, however large', () => {
    expect(fittingPrefix([message('a', 10_000), message('a', 10)], 1, 100)).toBe(1);
  });

  it('counts headers and keys as well as values', () => {
    const bare = recordBytesAtMost({ key: 'k', value: 'v', headers: {} });
    expect(recordBytesAtMost({ key: 'k', value: 'v', headers: { name: 'value' } })).toBeGreaterThanOrEqual(bare + 9);
  });
});
