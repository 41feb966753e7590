import { describe, expect, it } from 'vitest';
import { SerialBatcher } from './serial-batcher.ts';

describe('SerialBatcher', () => {
  it('sends what arrives in one turn as one job', async () => {
    const jobs: number[][] = [];
    const batcher = new SerialBatcher<number>(async (items) => {
      jobs.push(items);
    });
    await Promise.all([batcher.add([1]), batcher.add([2, 3]), batcher.add([4])]);
    expect(jobs).toEqual([[1, 2, 3, 4]]);
  });

  it('runs one job at a time and sends what arrived meanwhile in the next', async () => {
    const jobs: number[][] = [];
    let running = 0;
    let release!: () => void;
    const firstHeld = new Promise<void>((r) => (release = r));
    const batcher = new SerialBatcher<number>(async (items) => {
      running += 1;
      expect(running).toBe(1);
      jobs.push(items);
      if (jobs.length === 1) await firstHeld;
      running -= 1;
    });
    const first = batcher.add([1]);
    await new Promise((r) => setImmediate(r));
    const later = [batcher.add([2]), batcher.add([3])];
    await new Promise((r) => setImmediate(r));
    expect(jobs).toEqual([[1]]);
    release();
    await Promise.all([first, ...later]);
    expect(jobs).toEqual([[1], [2, 3]]);
  });

  it('rejects every caller of a failed job and goes on with the next', async () => {
    let calls = 0;
    const batcher = new SerialBatcher<string>(async () => {
      calls += 1;
      if (calls === 1) throw new Error('no ack');
    });
    const failed = [batcher.add(['a']), batcher.add(['b'])];
    await expect(failed[0]).rejects.toThrow('no ack');
    await expect(failed[1]).rejects.toThrow('no ack');
    await expect(batcher.add(['c'])).resolves.toBeUndefined();
    expect(calls).toBe(2);
  });
});
