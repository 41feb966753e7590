import { describe, expect, it } from 'vitest';
import { achievedRate, driftWindowMs, failures, lagDrain, latencyDrift, ledger, rssGrowth, type SoakVerdicts } from './criteria.ts';

// Synthetic runs shaped as bench:soak records them: 500 req/s, a sample every 10 s.
const RATE = 500;
const SAMPLE_MS = 10_000;

/** Requests due every 2 ms from `from` to `to`, each with the latency `at(due)` gives. */
function requestsOver(from: number, to: number, at: (due: number, i: number) => number) {
  const out: { due: number; latencyMs: number }[] = [];
  for (let due = from, i = 0; due < to; due += 1000 / RATE, i += 1) out.push({ due, latencyMs: at(due, i) });
  return out;
}

/** A flat latency: 40-80 ms, 1% at 120 ms (so the p99 sits at the edge of the tail). */
const flat = (_due: number, i: number) => (i % 100 === 0 ? 120 : 40 + (i % 41));

/** Soak samples (phase 'soak'), `count` of them, RSS per sample from `mb(k)`. */
function soakSamples(count: number, mb: (k: number) => { ingress: number; worker: number }) {
  return Array.from({ length: count }, (_, k) => ({ phase: 'soak' as const, sent: (RATE * SAMPLE_MS) / 1000, rssMb: mb(k) }));
}

describe('latency drift: the p99 of the last window of load within 1.5x of the first after the warm-up', () => {
  const soakStart = 120_000;
  const loadEnd = 1_200_000;

  it('windows are 5 minutes in a 20-minute soak and half the soak in a 2-minute one', () => {
    expect(driftWindowMs(loadEnd - soakStart)).toBe(300_000);
    expect(driftWindowMs(60_000)).toBe(30_000);
  });

  it('passes a flat run', () => {
    const drift = latencyDrift({ requests: requestsOver(0, loadEnd, flat), soakStart, loadEnd });
    expect(drift.first.count).toBe(150_000);
    expect(drift.last.count).toBe(150_000);
    expect(drift.ratio).toBe(1);
    expect(drift.pass).toBe(true);
  });

  it('ignores the warm-up', () => {
    const slowStart = (due: number, i: number) => (due < soakStart ? 5000 : flat(due, i));
    expect(latencyDrift({ requests: requestsOver(0, loadEnd, slowStart), soakStart, loadEnd }).pass).toBe(true);
  });

  it('fails a latency that doubles over the run', () => {
    const growing = (due: number, i: number) => flat(due, i) * (1 + due / loadEnd);
    const drift = latencyDrift({ requests: requestsOver(0, loadEnd, growing), soakStart, loadEnd });
    expect(drift.ratio).toBeGreaterThan(1.5);
    expect(drift.pass).toBe(false);
  });

  it('fails issue 35: from minute 8, a stall every 20 s that grows with time, the windows between flat', () => {
    // Every 20 s, a stall of 2 s whose requests wait up to 130 ms at minute 8 and ~380 ms at minute 20.
    const spiky = (due: number, i: number) => {
      const base = flat(due, i);
      if (due < 480_000 || due % 20_000 >= 2000) return base;
      return base + 60 + ((due - 480_000) / (loadEnd - 480_000)) * 260;
    };
    const drift = latencyDrift({ requests: requestsOver(0, loadEnd, spiky), soakStart, loadEnd });
    expect(drift.first.p99).toBeLessThan(150);
    expect(drift.pass).toBe(false);
  });

  it('fails when the last window has no applied record at all', () => {
    const drift = latencyDrift({ requests: requestsOver(0, 900_000, flat), soakStart, loadEnd });
    expect(drift.last.count).toBe(0);
    expect(drift.pass).toBe(false);
  });

  it('scaled to a 2-minute soak: halves of the 60 s after the 60 s warm-up', () => {
    const requests = requestsOver(0, 120_000, (due, i) => (due >= 90_000 ? 2 * flat(due, i) : flat(due, i)));
    const drift = latencyDrift({ requests, soakStart: 60_000, loadEnd: 120_000 });
    expect(drift.windowMs).toBe(30_000);
    expect(drift.first.count).toBe(15_000);
    expect(drift.pass).toBe(false);
    expect(latencyDrift({ requests: requestsOver(0, 120_000, flat), soakStart: 60_000, loadEnd: 120_000 }).pass).toBe(true);
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
      drift: latencyDrift({ requests: [], soakStart: 60_000, loadEnd: 120_000 }),
      rate: achievedRate({ scheduled, answers: Array.from({ length: scheduled }, () => ({ status: 503 })) }),
    };
    expect(verdicts.ledger.exact).toBe(true);
    expect(verdicts.rss.every((r) => r.pass) && verdicts.lag.pass).toBe(true);
    const failed = failures(verdicts);
    expect(failed).toHaveLength(2);
    expect(failed[0]).toMatch(/p99 drifted/);
    expect(failed[1]).toMatch(/^0\.0% of the 60000 scheduled requests answered 2xx, 60000 answered 503$/);
  });

  it('a run that meets every criterion has no failure', () => {
    const requests = requestsOver(0, 120_000, flat);
    const verdicts: SoakVerdicts = {
      rss: rssGrowth(soakSamples(6, () => ({ ingress: 120, worker: 150 }))),
      lag: lagDrain(10, 600, 3),
      ledger: ledger({ sent: requests.map(() => ({ status: 202, applied: true })), duplicates: 0, foreign: 0 }),
      drift: latencyDrift({ requests, soakStart: 60_000, loadEnd: 120_000 }),
      rate: achievedRate({ scheduled: requests.length, answers: requests.map(() => ({ status: 202 })) }),
    };
    expect(failures(verdicts)).toEqual([]);
  });
});
