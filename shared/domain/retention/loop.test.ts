import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RetentionLoop } from './loop.ts';
import type { RetentionRunReport } from './pruner.ts';

const report = (result: RetentionRunReport['result']): RetentionRunReport => ({
  result,
  startedAt: new Date(),
  seconds: 0,
  batches: 0,
  counts: [],
});

describe('RetentionLoop', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs after the initial delay, then one interval after each run ends; runs never overlap', async () => {
    const starts: number[] = [];
    let active = 0;
    let maxActive = 0;
    const loop = new RetentionLoop({
      initialDelayMs: 30_000,
      intervalMs: 600_000,
      run: async () => {
        starts.push(Date.now());
        active += 1;
        maxActive = Math.max(maxActive, active);
        await new Promise((r) => setTimeout(r, 5_000)); // a run of 5 s
        active -= 1;
        return report('complete');
      },
    });
    const t0 = Date.now();
    loop.start();
    await vi.advanceTimersByTimeAsync(29_999);
    expect(starts).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(starts).toEqual([t0 + 30_000]);
    await vi.advanceTimersByTimeAsync(5_000 + 600_000);
    expect(starts).toEqual([t0 + 30_000, t0 + 635_000]);
    expect(maxActive).toBe(1);
    expect(loop.runs).toBe(1);
    await vi.advanceTimersByTimeAsync(5_000); // the second run ends (this one ignores the abort signal)
    expect(loop.runs).toBe(2);
    await loop.stop();
  });

  it('stop() aborts the run in progress and waits for it; nothing runs afterwards', async () => {
    let signal: AbortSignal | undefined;
    let finished = false;
    const run = vi.fn(async (s: AbortSignal) => {
      signal = s;
      await new Promise<void>((resolve) => s.addEventListener('abort', () => resolve()));
      finished = true;
      return report('stopped');
    });
    const onRun = vi.fn();
    const loop = new RetentionLoop({ initialDelayMs: 0, intervalMs: 1000, run, onRun }).start();
    await vi.advanceTimersByTimeAsync(0);
    expect(run).toHaveBeenCalledTimes(1);
    await loop.stop();
    expect(signal?.aborted).toBe(true);
    expect(finished).toBe(true);
    expect(onRun).toHaveBeenCalledWith(expect.objectContaining({ result: 'stopped' }));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(run).toHaveBeenCalledTimes(1);
  });

  it('a run that throws is reported as failed, and an observer that throws does not stop the loop', async () => {
    const results: string[] = [];
    let n = 0;
    const loop = new RetentionLoop({
      initialDelayMs: 0,
      intervalMs: 100,
      run: async () => {
        n += 1;
        if (n === 1) throw new Error('database gone');
        return report('complete');
      },
      onRun: (r) => {
        results.push(r.result);
        throw new Error('observer bug');
      },
    }).start();
    await vi.advanceTimersByTimeAsync(250);
    expect(results.slice(0, 3)).toEqual(['failed', 'complete', 'complete']);
    await loop.stop();
  });

  it('stop() before the first run: it never runs', async () => {
    const run = vi.fn(async () => report('complete'));
    const loop = new RetentionLoop({ initialDelayMs: 1000, intervalMs: 1000, run }).start();
    await loop.stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(run).not.toHaveBeenCalled();
  });
});
