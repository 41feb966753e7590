import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  BENCHMARKS_DOC,
  CATALOGUE,
  formatRange,
  README,
  renderBenchmarksDoc,
  renderHeadlines,
  runsTable,
  withHeadlines,
} from './render-docs.ts';
import { readBenchResults } from './results.ts';

describe('docs/benchmarks.md', () => {
  it('is what npm run bench:docs renders from the committed bench/results/*.json', () => {
    expect(readFileSync(BENCHMARKS_DOC, 'utf8')).toBe(renderBenchmarksDoc(readBenchResults()));
  });

  it("and the README's headline figures are what it renders from them", () => {
    const readme = readFileSync(README, 'utf8');
    expect(readme).toBe(withHeadlines(readme, renderHeadlines(readBenchResults())));
  });

  it('has a results file for every benchmark it describes, and an entry for every results file', () => {
    const results = readBenchResults();
    expect(results.map((r) => r.name).sort()).toEqual(CATALOGUE.map((e) => e.name).sort());
    expect(() => renderBenchmarksDoc(results.slice(1))).toThrow(/no bench\/results/);
    expect(() => renderBenchmarksDoc([...results, { ...results[0]!, name: 'unknown' }])).toThrow(/no entry for unknown/);
  });

  it('keeps every committed result complete: machine, versions, rounds and a summary', () => {
    for (const r of readBenchResults()) {
      expect(r.machine.cpus, r.name).toBeGreaterThan(0);
      expect(r.versions.node, r.name).toBeTruthy();
      expect(r.rounds.length, r.name).toBeGreaterThan(0);
      expect(r.summary.length, r.name).toBeGreaterThan(0);
      for (const f of r.summary) expect(f.values.length, `${r.name}: ${f.label}`).toBeGreaterThan(0);
    }
  });
});

describe('formatRange', () => {
  it('shows the low and high value with the unit, or one value when they agree', () => {
    expect(formatRange({ label: 'rate', unit: 'events/s', values: [10_738, 11_959, 11_228] })).toBe('10,738–11,959 events/s');
    expect(formatRange({ label: 'p99', unit: 'ms', values: [36.66] })).toBe('36.7 ms');
    expect(formatRange({ label: 'ratio', unit: '', values: [0.54, 0.528] })).toBe('0.53–0.54');
    expect(formatRange({ label: 'share', unit: '%', values: [57.2, 78.7] })).toBe('57–79%');
    expect(formatRange({ label: 'lost', unit: 'events', values: [0] })).toBe('0 events');
    expect(formatRange({ label: 'none', unit: 'ms', values: [Number.NaN] })).toBe('n/a');
  });
});

describe('runsTable', () => {
  it('shows each kept run and the low / median / high of every figure over them', () => {
    const table = runsTable([
      {
        ranAt: '2026-12-03T18:00:00.000Z',
        loadAverage: { before: 1.2, after: 1.5 },
        figures: { 'ratio at 100': 2.4, 'ratio at 1,000': 1.6 },
      },
      { ranAt: '2026-12-03T18:20:00.000Z', figures: { 'ratio at 100': 1.8 } },
      { ranAt: '2026-12-03T18:40:00.000Z', figures: { 'ratio at 100': 2.1, 'ratio at 1,000': 1.9 } },
    ]);
    expect(table.split('\n')).toEqual([
      '| run (UTC) | load average before / after | ratio at 100 | ratio at 1,000 |',
      '| --- | --- | --: | --: |',
      '| 2026-12-03 18:00 | 1.2 / 1.5 | 2.40 | 1.60 |',
      '| 2026-12-03 18:20 |  | 1.80 |  |',
      '| 2026-12-03 18:40 |  | 2.10 | 1.90 |',
      '| **low / median / high over 3 runs** | | 1.80 / 2.10 / 2.40 | 1.60 / 1.75 / 1.90 |',
      '',
    ]);
  });

  it('is empty without runs', () => {
    expect(runsTable([])).toBe('');
  });
});
