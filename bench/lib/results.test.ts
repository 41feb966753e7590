import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { machineNow, readBenchResults, versionsNow, writeBenchResult, type BenchResult } from './results.ts';

const dirs: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-results-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const result = (overrides: Partial<BenchResult> = {}): BenchResult => ({
  name: 'ingress',
  command: 'npm run bench:ingress',
  ranAt: '2026-01-01T00:00:00.000Z',
  machine: machineNow(0.5),
  calibrationMs: { before: 900, after: 910 },
  versions: versionsNow({ kafka: '4.1.1', postgres: '15.20' }),
  settings: { rounds: 2 },
  rounds: [
    { round: 1, ratio: 0.5 },
    { round: 2, ratio: 0.6 },
  ],
  summary: [{ label: 'ratio', unit: '', values: [0.5, 0.6], target: '≥ 0.5' }],
  ...overrides,
});

describe('writeBenchResult', () => {
  it('writes <name>.json with every round and the summary, and reads it back', () => {
    const dir = scratch();
    const file = writeBenchResult(result(), dir);
    expect(file).toBe(path.join(dir, 'ingress.json'));
    const text = readFileSync(file, 'utf8');
    expect(text.endsWith('}\n')).toBe(true);
    const [read] = readBenchResults(dir);
    expect(read).toEqual(result({ machine: read!.machine, versions: read!.versions }));
    expect(read!.rounds).toHaveLength(2);
    expect(read!.summary[0]!.values).toEqual([0.5, 0.6]);
  });

  it('records node and the installed kafkajs beside the servers it is given', () => {
    const versions = versionsNow({ kafka: '4.1.1', postgres: '15.20' });
    expect(versions).toMatchObject({ node: process.version, kafka: '4.1.1', postgres: '15.20' });
    expect(versions.kafkajs).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('records the machine and the load average before and after', () => {
    const machine = machineNow(1.25);
    expect(machine.cpus).toBeGreaterThan(0);
    expect(machine.loadAverage?.before).toBe(1.25);
    expect(machineNow().loadAverage).toBeUndefined();
  });

  it('refuses a name that is not a file name and a figure without values', () => {
    const dir = scratch();
    expect(() => writeBenchResult(result({ name: '../x' }), dir)).toThrow(/plain file name/);
    expect(() => writeBenchResult(result({ summary: [{ label: 'empty', unit: 'ms', values: [] }] }), dir)).toThrow(/no values/);
  });
});
