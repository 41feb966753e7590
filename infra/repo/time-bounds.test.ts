import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// A test asserts what the bridge does, never how fast the machine running it is: speed goals live
// in the benchmarks (bench/). Where a test still bounds a duration from above, the bound guards
// liveness only (a stop that completes, a resume after a fault), sits far above the quiet-machine
// figure, and a comment within a few lines above it says "liveness". This check finds every upper
// bound on a duration-like value in a test and asks for that comment.
const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
// bench/ is left out: its tests judge criteria on synthetic figures, which is what a bench is for.
const ROOTS = ['test', 'shared', 'services', 'infra'];
const DURATION_LIKE =
  /performance\.now|Date\.now|hrtime|\w(?:Ms|Millis|Seconds)\b|\bms\b|elapsed|took|waited|median|\bp9\d\b|latency|duration/i;
const LOOK_BACK_LINES = 4;

function testFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (name === 'node_modules' || name.startsWith('.')) return [];
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return testFiles(full);
    return name.endsWith('.test.ts') ? [full] : [];
  });
}

/** Upper bounds on duration-like values without a liveness comment just above: `file:line`. */
export function unexplainedTimeBounds(source: string): number[] {
  const lines = source.split('\n');
  const found: number[] = [];
  // The argument of one expect(...), which may span lines, up to the matcher; never across another expect.
  for (const m of source.matchAll(/expect\(((?:(?!expect\()[\s\S])*?)\)\s*\.toBeLessThan(?:OrEqual)?\(/g)) {
    const subject = m[1]!;
    if (!DURATION_LIKE.test(subject.split(',')[0]!)) continue;
    const first = source.slice(0, m.index).split('\n').length - 1;
    const last = first + m[0].split('\n').length - 1;
    const context = lines.slice(Math.max(0, first - LOOK_BACK_LINES), last + 1).join('\n');
    if (!/liveness/i.test(context)) found.push(first + 1);
  }
  return found;
}

describe('time bounds in tests', () => {
  it('finds an unexplained bound and accepts a liveness one (the rule bites)', () => {
    expect(unexplainedTimeBounds('const t = performance.now();\nexpect(performance.now() - t).toBeLessThan(1000);')).toEqual([2]);
    expect(unexplainedTimeBounds('expect(\n  elapsedMs,\n  "why",\n).toBeLessThanOrEqual(5);')).toEqual([1]);
    expect(unexplainedTimeBounds('// Liveness only, far above the figure.\nexpect(waitedMs).toBeLessThan(60_000);')).toEqual([]);
    // Counts and sizes are not durations, and a lower bound on a duration never fails on a slow machine.
    expect(unexplainedTimeBounds('expect(rows.length).toBeLessThan(10);\nexpect(elapsed).toBeGreaterThan(100);')).toEqual([]);
    expect(unexplainedTimeBounds('expect(gauge).toBeLessThanOrEqual(expiring(Date.now()));')).toEqual([]);
  });

  it('every upper bound on a duration in a test guards liveness and says so', () => {
    const offenders = ROOTS.flatMap((root) => testFiles(path.join(repoRoot, root))).flatMap((file) =>
      unexplainedTimeBounds(readFileSync(file, 'utf8')).map((line) => `${path.relative(repoRoot, file)}:${line}`),
    );
    expect(offenders, 'move the speed goal into a benchmark, or mark a liveness bound far above the figure').toEqual([]);
  });
});
