import { describe, expect, it } from 'vitest';
import { summarise } from '../lib/stats.ts';
import { achievedRate, driftWindowSamples, failures, lagDrain, latencyDrift, ledger, rssGrowth, type SoakVerdicts } from './criteria.ts';

// Synthetic runs shaped as bench:soak records them: 500 req/s, a sample every 10 s.
const RATE = 500;
const SAMPLE_MS = 10_000;

/** Requests due at `rate` a second from `from` to `to`, each with the latency `at(due)` gives. */
function requestsOver(from: number, to: number, at: (due: number, i: number) => number, rate = RATE) {
  const out: { due: number; latencyMs: number }[] = [];
  for (let due = from, i = 0; due < to; due += 1000 / rate, i += 1) out.push({ due, latencyMs: at(due, i) });
  return out;
}

/** For the 20-minute drift cases: enough requests per sample for its p99, few enough to stay quick on a busy machine. */
const SPARSE_RATE = 50;

/** A flat latency: 40-80 ms, 1% at 120 ms (so the p99 sits at the edge of the tail). */
const flat = (_due: number, i: number) => (i % 100 === 0 ? 120 : 40 + (i % 41));

/** The samples bench:soak takes of these requests: one per SAMPLE_MS of due time, those of the warm-up first. */
function samplesOf(requests: { due: number; latencyMs: number }[], warmupMs: number, loadEndMs: number) {
  const windows = Array.from({ length: Math.ceil(loadEndMs / SAMPLE_MS) }, () => [] as number[]);
  for (const r of requests) windows[Math.floor(r.due / SAMPLE_MS)]?.push(r.latencyMs);
  return windows.map((latencies, k) => ({
    index: k + 1,
    phase: (k + 1) * SAMPLE_MS <= warmupMs ? ('warm-up' as const) : ('soak' as const),
    applied: latencies.length,
    e2e: summarise(latencies),
  }));
}

/** Soak samples straight from a list of per-sample p99s, as a results file's table shows them. */
function samplesWithP99s(warmup: number, p99s: number[]) {
  return [...Array.from({ length: warmup }, () => 1000), ...p99s].map((p99, k) => ({
    index: k + 1,
    phase: k < warmup ? ('warm-up' as const) : ('soak' as const),
    applied: (RATE * SAMPLE_MS) / 1000,
    e2e: { count: (RATE * SAMPLE_MS) / 1000, p50: p99 / 2, p99, max: p99 },
  }));
}

/** Soak samples (phase 'soak'), `count` of them, RSS per sample from `mb(k)`. */
function soakSamples(count: number, mb: (k: number) => { ingress: number; worker: number }) {
  return Array.from({ length: count }, (_, k) => ({ phase: 'soak' as const, sent: (RATE * SAMPLE_MS) / 1000, rssMb: mb(k) }));
}

describe('latency drift: the p90 of the per-sample p99s in the last window of load within 1.5x of the first after the warm-up', () => {
  const warmupMs = 120_000;
  const loadEnd = 1_200_000;
  const drift = (at: (due: number, i: number) => number, end = loadEnd) =>
    latencyDrift({ samples: samplesOf(requestsOver(0, end, at, SPARSE_RATE), warmupMs, loadEnd), sampleMs: SAMPLE_MS });
  /** Flat over the first 5 minutes after the warm-up, twice that over the last 5, a ramp between. */
  const doubling = (due: number, i: number) => flat(due, i) * (1 + Math.min(1, Math.max(0, (due - 420_000) / 480_000)));

  it('windows are 5 minutes of samples in a 20-minute soak and half the soak in a 2-minute one', () => {
    expect(driftWindowSamples(108, SAMPLE_MS)).toBe(30);
    expect(driftWindowSamples(6, SAMPLE_MS)).toBe(3);
    expect(driftWindowSamples(216, 5_000)).toBe(60);
  });

  it('passes a flat run', () => {
    const d = drift(flat);
    expect(d.first).toMatchObject({ from: 13, to: 42, samples: 30, empty: 0, p99: 120 });
    expect(d.last).toMatchObject({ from: 91, to: 120, samples: 30, empty: 0, p99: 120 });
    expect(d.ratio).toBe(1);
    expect(d.pass).toBe(true);
  });

  it('ignores the warm-up', () => {
    expect(drift((due, i) => (due < warmupMs ? 5000 : flat(due, i))).pass).toBe(true);
  });

  it('one noisy window, a sample at 400 ms among flat ones at 120 ms, does not fail it; nor do three', () => {
    const noisy = (windows: number[]) => (due: number, i: number) =>
      windows.some((w) => due >= w && due < w + SAMPLE_MS) ? flat(due, i) + 280 : flat(due, i);
    const one = drift(noisy([1_100_000]));
    expect(one.last.p99).toBe(120);
    expect(one.pass).toBe(true);
    expect(drift(noisy([950_000, 1_050_000, 1_160_000])).pass).toBe(true);
    // A fourth window is no longer noise: a tenth of the window's samples.
    expect(drift(noisy([950_000, 1_050_000, 1_080_000, 1_160_000])).pass).toBe(false);
  });

  it('fails a latency that doubles between the first 5 minutes after the warm-up and the last 5', () => {
    const d = drift(doubling);
    expect(d.ratio).toBe(2);
    expect(d.pass).toBe(false);
  });

  it('fails a stall every 20 s from minute 8 that grows with time, the windows between flat', () => {
    // Every 20 s, a stall of 2 s whose requests wait up to 130 ms at minute 8 and ~380 ms at minute 20.
    const d = drift((due, i) => {
      const base = flat(due, i);
      if (due < 480_000 || due % 20_000 >= 2000) return base;
      return base + 60 + ((due - 480_000) / (loadEnd - 480_000)) * 260;
    });
    expect(d.first.p99).toBeLessThan(150);
    expect(d.pass).toBe(false);
  });

  // The per-sample p99s of recorded 20-minute runs (bench/results/soak.md at each commit), first and
  // last 5 minutes of the soak: the samples the criterion reads. bench/JOURNAL.md (its soak section) has the rest.
  const recorded = (first: number[], last: number[]) =>
    latencyDrift({ samples: samplesWithP99s(12, [...first, ...Array.from({ length: 48 }, () => 100), ...last]), sampleMs: SAMPLE_MS });

  it("fails the run of 8564dcc: spikes in five of the last thirty samples, the generator's own stalls", () => {
    const d = recorded(
      [68, 63, 86, 70, 109, 101, 88, 75, 76, 90, 64, 61, 86, 56, 97, 56, 59, 58, 75, 54, 77, 56, 91, 72, 110, 89, 65, 81, 110, 83],
      [79, 74, 102, 95, 323, 76, 70, 97, 127, 151, 96, 83, 100, 75, 532, 258, 75, 356, 71, 132, 81, 72, 91, 93, 95, 269, 86, 83, 82, 70],
    );
    expect(d.pass).toBe(false);
  });

  it('fails the climb of the outbox scan (184dd65)', () => {
    const d = recorded(
      [
        92, 160, 98, 148, 124, 161, 94, 78, 162, 139, 126, 134, 94, 91, 125, 181, 110, 226, 154, 110, 170, 185, 140, 169, 135, 163, 148,
        160, 150, 149,
      ],
      [
        292, 271, 385, 287, 253, 268, 176, 436, 627, 359, 518, 402, 470, 495, 810, 414, 435, 352, 368, 352, 353, 334, 273, 296, 311, 394,
        411, 373, 399, 391,
      ],
    );
    expect(d.pass).toBe(false);
  });

  it('passes the 20-minute run kept in bench/results (1f6f098), and still with its quietest last sample at 10 s', () => {
    const first = [
      293, 99, 126, 217, 109, 167, 317, 116, 96, 392, 120, 158, 336, 139, 162, 406, 119, 189, 113, 170, 222, 84, 134, 176, 100, 174, 221,
      126, 207, 137,
    ];
    const last = [
      97, 80, 118, 186, 69, 83, 107, 88, 152, 209, 103, 131, 194, 97, 144, 103, 97, 114, 278, 89, 80, 140, 80, 93, 206, 89, 63, 139, 83, 80,
    ];
    expect(recorded(first, last).pass).toBe(true);
    expect(
      recorded(
        first,
        last.map((p) => (p === 63 ? 10_000 : p)),
      ).pass,
    ).toBe(true);
  });

  it('counts a sample without an applied record as the slowest: one is left out, many fail, a first window of them fails', () => {
    const flatSamples = samplesOf(requestsOver(0, loadEnd, flat, SPARSE_RATE), warmupMs, loadEnd);
    const withEmpty = (empty: (k: number) => boolean) =>
      latencyDrift({
        samples: flatSamples.map((s) => (empty(s.index) ? { ...s, applied: 0, e2e: summarise([]) } : s)),
        sampleMs: SAMPLE_MS,
      });
    const one = withEmpty((k) => k === 110);
    expect(one.last).toMatchObject({ empty: 1, p99: 120 });
    expect(one.pass).toBe(true);
    const many = withEmpty((k) => k > 100);
    expect(many.last).toMatchObject({ empty: 20, p99: Infinity });
    expect(many.pass).toBe(false);
    const stalledStart = withEmpty((k) => k <= 40);
    expect(stalledStart.first.p99).toBe(Infinity);
    expect(stalledStart.ratio).toBe(0);
    expect(stalledStart.pass).toBe(false);
  });

  it('fails when the last window has no applied record at all', () => {
    const d = drift(flat, 900_000);
    expect(d.last).toMatchObject({ samples: 30, empty: 30 });
    expect(d.pass).toBe(false);
  });

  it('scaled to a 2-minute soak: halves of the 60 s after the 60 s warm-up', () => {
    const short = (at: (due: number, i: number) => number) =>
      latencyDrift({ samples: samplesOf(requestsOver(0, 120_000, at), 60_000, 120_000), sampleMs: SAMPLE_MS });
    const doubled = short((due, i) => (due >= 90_000 ? 2 * flat(due, i) : flat(due, i)));
    expect(doubled.windowSamples).toBe(3);
    expect(doubled.first).toMatchObject({ from: 7, to: 9 });
    expect(doubled.pass).toBe(false);
    expect(short(flat).pass).toBe(true);
  });

  it('--drift=report: the figure, never a failure', () => {
    const samples = samplesOf(requestsOver(0, loadEnd, doubling, SPARSE_RATE), warmupMs, loadEnd);
    const reported = latencyDrift({ samples, sampleMs: SAMPLE_MS, judged: false });
    expect(reported).toMatchObject({ judged: false, pass: false });
    expect(reported.ratio).toBe(2);
    const judged = latencyDrift({ samples, sampleMs: SAMPLE_MS });
    const others = { rss: [], lag: lagDrain(0, 250, 1), ledger: ledger({ sent: [], duplicates: 0, foreign: 0 }) };
    const rate = achievedRate({ scheduled: 0, answers: [] });
    expect(failures({ ...others, rate, drift: reported }).filter((f) => /drift/.test(f))).toEqual([]);
    expect(failures({ ...others, rate, drift: judged }).filter((f) => /drift/.test(f))).toHaveLength(1);
  });
});

describe('lag back to 0: within 10 s, or the bound the run sets', () => {
  it('fails at 10 s and a drain that never ends; a looser bound passes the former', () => {
    expect(lagDrain(500, 9_000, 40).pass).toBe(true);
    expect(lagDrain(500, 12_000, 50).pass).toBe(false);
    expect(lagDrain(500, 12_000, 50, 120_000)).toMatchObject({ limitMs: 120_000, pass: true });
    expect(lagDrain(500, NaN, 500, 120_000).pass).toBe(false);
  });
});

describe('achieved rate: at least 99% of the schedule answered 2xx, at most 0.1% 503', () => {
  const answers = (n: number, status: (i: number) => number) => Array.from({ length: n }, (_, i) => ({ status: status(i) }));

  it('passes a run that answered everything 2xx', () => {
    expect(achievedRate({ scheduled: 60_000, answers: answers(60_000, () => 202) })).toMatchObject({
      share: 1,
      unavailable: 0,
      pass: true,
    });
  });

  it('fails a bridge that answers 503 to everything', () => {
    const rate = achievedRate({ scheduled: 60_000, answers: answers(60_000, () => 503) });
    expect(rate).toMatchObject({ accepted: 0, unavailable: 60_000, pass: false });
  });

  it('fails below 99% of the schedule, whatever the other answers were', () => {
    // 98.9% answered 2xx, the rest 400: no 503, but the floor is not met.
    expect(achievedRate({ scheduled: 60_000, answers: answers(60_000, (i) => (i % 1000 < 989 ? 202 : 400)) }).pass).toBe(false);
  });

  it('counts the schedule, not what the generator managed to send', () => {
    // A generator that fell behind and sent only 90% of the schedule, all answered 2xx.
    expect(achievedRate({ scheduled: 60_000, answers: answers(54_000, () => 202) }).pass).toBe(false);
  });

  it('fails on more 503s than 0.1% of the schedule even above the 2xx floor', () => {
    expect(achievedRate({ scheduled: 60_000, answers: answers(60_000, (i) => (i % 1000 < 995 ? 202 : 503)) }).pass).toBe(false);
    expect(achievedRate({ scheduled: 60_000, answers: answers(60_000, (i) => (i % 1000 < 999 ? 202 : 503)) }).pass).toBe(true);
  });
});

describe('RSS: growth under 10% and under 512 B per request', () => {
  const noise = (k: number) => ((k * 7) % 5) * 0.4; // 0-1.6 MiB up and down

  it('passes flat services in a 20-minute and a 2-minute soak', () => {
    for (const count of [108, 6]) {
      const rss = rssGrowth(soakSamples(count, (k) => ({ ingress: 130 + noise(k), worker: 160 + noise(k + 2) })));
      expect(rss.every((r) => r.pass)).toBe(true);
    }
  });

  it('fails a leak of 1 KiB per request in a 2-minute soak, although it grows the worker less than 10%', () => {
    // 60 s of soak at 500 req/s: 6 samples, the medians of the first and last 3 are 15,000 requests apart.
    const leak = (k: number) => (k * SAMPLE_MS * RATE * 1024) / 1000 / 2 ** 20;
    const rss = rssGrowth(soakSamples(6, (k) => ({ ingress: 130 + noise(k), worker: 160 + leak(k) + noise(k) })));
    const worker = rss.find((r) => r.service === 'worker')!;
    expect(worker.requests).toBe(15_000);
    expect(worker.growth).toBeLessThan(0.1);
    expect(worker.bytesPerRequest).toBeGreaterThan(900);
    expect(worker.pass).toBe(false);
    expect(rss.find((r) => r.service === 'ingress')!.pass).toBe(true);
  });

  it("fails the same leak in npm test's soak: half the rate, a 90 s warm-up and 90 s of soak, as many requests apart", () => {
    const rate = RATE / 2;
    const samples = Array.from({ length: 9 }, (_, k) => ({
      phase: 'soak' as const,
      sent: (rate * SAMPLE_MS) / 1000,
      rssMb: { ingress: 130, worker: 160 + (k * SAMPLE_MS * rate * 1024) / 1000 / 2 ** 20 },
    }));
    const worker = rssGrowth(samples).find((r) => r.service === 'worker')!;
    expect(worker.requests).toBe(15_000);
    expect(worker.pass).toBe(false);
  });

  it('fails a leak of 1 KiB per request in a 20-minute soak', () => {
    const leak = (k: number) => (k * SAMPLE_MS * RATE * 1024) / 1000 / 2 ** 20;
    const rss = rssGrowth(soakSamples(108, (k) => ({ ingress: 130 + leak(k), worker: 160 })));
    expect(rss.find((r) => r.service === 'ingress')!.pass).toBe(false);
  });

  it('fails a service that grows 10% even slowly per request', () => {
    const rss = rssGrowth(soakSamples(108, (k) => ({ ingress: 130, worker: k < 54 ? 160 : 180 })));
    const worker = rss.find((r) => r.service === 'worker')!;
    expect(worker.bytesPerRequest).toBeLessThan(512);
    expect(worker.pass).toBe(false);
  });
});

describe('the verdict', () => {
  it('a bridge that answers 503 to everything used to pass (flat RSS, no lag, an exact ledger of nothing); it fails now', () => {
    const scheduled = 60_000;
    const verdicts: SoakVerdicts = {
      rss: rssGrowth(soakSamples(6, () => ({ ingress: 120, worker: 150 }))),
      lag: lagDrain(0, 250, 1),
      ledger: ledger({ sent: Array.from({ length: scheduled }, () => ({ status: 503, applied: false })), duplicates: 0, foreign: 0 }),
      drift: latencyDrift({ samples: samplesOf([], 60_000, 120_000), sampleMs: SAMPLE_MS }),
      rate: achievedRate({ scheduled, answers: Array.from({ length: scheduled }, () => ({ status: 503 })) }),
    };
    expect(verdicts.ledger.exact).toBe(true);
    expect(verdicts.rss.every((r) => r.pass) && verdicts.lag.pass).toBe(true);
    const failed = failures(verdicts);
    expect(failed).toHaveLength(2);
    expect(failed[0]).toMatch(/^POST -> applied p99 drift not measurable \(p90 of the per-sample p99s n\/a \(3 of 3 samples without/);
    expect(failed[1]).toMatch(/^0\.0% of the 60000 scheduled requests answered 2xx, 60000 answered 503$/);
  });

  it('a run that meets every criterion has no failure', () => {
    const requests = requestsOver(0, 120_000, flat);
    const verdicts: SoakVerdicts = {
      rss: rssGrowth(soakSamples(6, () => ({ ingress: 120, worker: 150 }))),
      lag: lagDrain(10, 600, 3),
      ledger: ledger({ sent: requests.map(() => ({ status: 202, applied: true })), duplicates: 0, foreign: 0 }),
      drift: latencyDrift({ samples: samplesOf(requests, 60_000, 120_000), sampleMs: SAMPLE_MS }),
      rate: achievedRate({ scheduled: requests.length, answers: requests.map(() => ({ status: 202 })) }),
    };
    expect(failures(verdicts)).toEqual([]);
  });
});
