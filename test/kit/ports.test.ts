import { describe, expect, it } from 'vitest';
import { freePort, freePortRange, portSlice } from './ports.ts';

describe('test ports', () => {
  it('gives the vitest workers that run at once slices of the range that do not overlap', () => {
    const slices = [1, 2, 3, 4, 5, 6, 7, 8].map((id) => portSlice(String(id)));
    for (const [i, a] of slices.entries()) {
      expect(a.lowest).toBeGreaterThanOrEqual(20_000);
      expect(a.end).toBeLessThanOrEqual(32_768);
      expect(a.end - a.lowest).toBeGreaterThan(1000);
      for (const b of slices.slice(i + 1)) expect(a.end <= b.lowest || b.end <= a.lowest).toBe(true);
    }
    expect(portSlice(undefined)).toEqual({ lowest: 20_000, end: 32_768 });
  });

  it('never hands out the same port twice in one process', async () => {
    const { lowest, end } = portSlice(process.env.VITEST_POOL_ID);
    const drawn: number[] = [];
    for (let i = 0; i < 100; i += 1) drawn.push(await freePort());
    const base = await freePortRange(6);
    drawn.push(base, base + 1, base + 2, base + 3, base + 4, base + 5);
    expect(new Set(drawn).size).toBe(drawn.length);
    for (const port of drawn) expect(port >= lowest && port < end).toBe(true);
  });
});
