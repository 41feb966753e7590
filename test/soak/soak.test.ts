import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, inject, it } from 'vitest';
import { repoRoot } from '../kit/infra.ts';

// The soak cut to a few minutes, as a test of behaviour, not of speed:
// `npm run bench:soak` (bench/soak/run.ts) as a subprocess against the suite's broker and Postgres,
// judged by its exit code. It must pass on a machine half as fast as the one it was written on, so
// it checks only what a slower machine does not change:
// - the ledger: every 2xx answer has exactly one applied record, and nothing else is on the topic;
// - the schedule answered: at least 99% of it 2xx, at most 0.1% 503. bench:soak's default rate
//   keeps nearly all of this machine's two cores busy (bench/results/soak.md), so a machine with
//   half its CPU would queue at it; the test runs at half that rate (bench/JOURNAL.md);
// - RSS: each service's growth after the warm-up under 512 B per request (a 1 KiB-per-request leak
//   fails) and under 10%. The run is longer than two minutes so that, at half the rate, the
//   medians compared still stand as many requests apart as before (bench/soak/criteria.test.ts) and
//   the baseline is taken past the services' climb to their working size. Over so few requests a
//   10% growth is more than the per-request bound allows, so the share adds nothing a slower
//   machine could trip;
// - the lag back to 0 after the load stops, within a bound far above bench:soak's own: it guards
//   liveness only (a worker that stopped consuming), not how fast a backlog drains.
// The POST -> applied drift is printed, not judged (--drift=report): a ratio of latencies over a
// minute or two of a shared machine moves by itself; bench:soak judges it over 20 minutes, run on
// purpose (docs/benchmarks.md). The results go to a temporary folder (kept when the test fails),
// never over bench/results/soak.md. The soak runs last and alone (vitest.config.ts), so nothing
// else on the machine feeds it a backlog. SOAK_TEST_RATE / SOAK_TEST_DURATION_MS /
// SOAK_TEST_WARMUP_MS change the run; at a lower rate the services take longer to reach their
// working size, so keep the warm-up long enough to cover the climb.
const RATE = Number(process.env.SOAK_TEST_RATE ?? 250);
const DURATION_MS = Number(process.env.SOAK_TEST_DURATION_MS ?? 180_000);
const WARMUP_MS = Number(process.env.SOAK_TEST_WARMUP_MS ?? DURATION_MS / 2);
// Liveness only: a slow machine draining a backlog never takes this long, a worker that stopped does.
const LAG_ZERO_WITHIN_MS = 120_000;

const out = mkdtempSync(path.join(os.tmpdir(), 'soak-test-'));
let passed = false;
afterAll(() => {
  if (passed) rmSync(out, { recursive: true, force: true });
  else console.error(`bench:soak results kept in ${out}`);
});

it(
  `a ${DURATION_MS / 60_000}-minute soak at ${RATE} req/s applies every 2xx exactly once, answers >= 99% of its schedule 2xx and <= 0.1% 503, grows no service's RSS by 512 B per request or 10%, and drains its lag within ${LAG_ZERO_WITHIN_MS / 1000} s (liveness); its drift reported, not judged`,
  async () => {
    const results = path.join(out, 'soak.md');
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(repoRoot, 'bench', 'soak', 'run.ts'),
        `--rate=${RATE}`,
        `--duration-ms=${DURATION_MS}`,
        `--warmup-ms=${WARMUP_MS}`,
        `--out=${results}`,
        '--drift=report',
        `--lag-zero-within-ms=${LAG_ZERO_WITHIN_MS}`,
      ],
      {
        cwd: repoRoot,
        // The bench makes its own database (from this admin URL) and its own topics.
        env: { ...process.env, KAFKA_BROKERS: inject('kafkaBrokers'), DATABASE_URL: inject('pgAdminUrl'), BENCH_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // A timed-out test must not leave the bench (and its services) running: SIGTERM makes it stop them.
    // The load, the longest drain the lag bound allows, and the set-up and teardown of a slow machine.
    const timer = setTimeout(() => child.kill('SIGTERM'), DURATION_MS + LAG_ZERO_WITHIN_MS + 180_000);
    const [code] = (await once(child, 'exit')) as [number | null];
    clearTimeout(timer);

    const report = existsSync(results) ? readFileSync(results, 'utf8') : '';
    const criteria = /## Results\n([\s\S]*?)\n\*\*(?:PASS|FAIL)\*\*/.exec(report)?.[1] ?? '(no results file)';
    expect(code, `bench:soak exited ${code}\n${criteria}\n${stderr.split('\n').slice(-25).join('\n')}`).toBe(0);
    expect(report).toContain('\n**PASS**.\n');
    expect(existsSync(path.join(out, 'soak.svg'))).toBe(true);
    expect(criteria).toMatch(/not judged \(--drift=report\)/);
    passed = true;
    const answers = /non-2xx answers: (.*)/.exec(report)?.[1] ?? '';
    console.log(
      `bench:soak, ${RATE} req/s for ${DURATION_MS / 1000} s (warm-up ${WARMUP_MS / 1000} s):\n${criteria}\nnon-2xx answers: ${answers}`,
    );
  },
  DURATION_MS + LAG_ZERO_WITHIN_MS + 240_000,
);
