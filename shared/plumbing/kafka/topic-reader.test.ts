import { describe, expect, it } from 'vitest';
import { clampRanges, takeInRange } from './topic-reader.ts';

const messages = (...offsets: number[]) => offsets.map((o) => ({ offset: String(o) }));
const offsets = (scan: { inRange: Array<{ offset: string }> }) => scan.inRange.map((m) => Number(m.offset));

describe('takeInRange', () => {
  it('keeps [from, to) of a batch and reports a full scan', () => {
    const scan = takeInRange({ partition: 0, from: 3n, to: 6n }, messages(1, 2, 3, 4, 5, 6, 7), () => true);
    expect(offsets(scan)).toEqual([3, 4, 5]);
    expect(scan.complete).toBe(true);
  });

  it('a gap (compaction) inside the range is a full scan too', () => {
    const scan = takeInRange({ partition: 0, from: 3n, to: 10n }, messages(2, 4, 12), () => true);
    expect(offsets(scan)).toEqual([4]);
    expect(scan.complete).toBe(true);
  });

  // The old reader broke out of the loop here, then counted the batch's last offset as read:
  // a range ending inside this batch was marked done with records 5.. never handled.
  it('a batch that goes stale part-way counts for nothing', () => {
    let checks = 0;
    const scan = takeInRange({ partition: 0, from: 3n, to: 8n }, messages(3, 4, 5, 6, 7, 8, 9), () => (checks += 1) <= 2);
    expect(scan).toEqual({ inRange: [], complete: false });
  });

  it('a stale batch from before a seek (positions forgotten after a restart) counts for nothing', () => {
    expect(takeInRange({ partition: 0, from: 100n, to: 200n }, messages(0, 1, 2), () => false)).toEqual({ inRange: [], complete: false });
  });
});

describe('clampRanges', () => {
  it('clamps to the log and drops empty ranges', () => {
    expect(
      clampRanges(
        [
          { partition: 0, from: 0n, to: 50n },
          { partition: 1, from: 30n, to: 40n },
        ],
        [
          { partition: 0, low: '5', high: '20' },
          { partition: 1, low: '0', high: '10' },
        ],
      ),
    ).toEqual([{ partition: 0, from: 5n, to: 20n }]);
  });
});
