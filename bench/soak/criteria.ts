// The soak's pass criteria. Issue 12: RSS after the warm-up grows less than 10% per service, the
// worker group's lag on the events topic is back to 0 within 10 s after the load stops, and the
// ledger is exact (2xx answers = applied records). Issue 35: latency that does not drift (the p99 of
// the last window of load within 1.5x of the first after the warm-up), the schedule answered 2xx
// (a bridge that refuses traffic keeps an exact ledger of nothing), few 503s, and RSS compared per
// request so a leak of 1 KiB per request fails a 2-minute run too.
import { summarise } from '../lib/stats.ts';
import type { Sample } from './sampler.ts';

export const RSS_GROWTH_LIMIT = 0.1;
/** Half the 1 KiB per request a leak must not hide under: the noise of a flat service is far below. */
export const RSS_BYTES_PER_REQUEST_LIMIT = 512;
export const DRIFT_LIMIT = 1.5;
/** The drift windows: 5 minutes each, or half the soak when it is shorter than 10 minutes. */
export const DRIFT_WINDOW_MS = 5 * 60_000;
export const ACHIEVED_SHARE_FLOOR = 0.99;
/** 503 answers (the ingress shedding, or its broker unreachable) at most this share of the schedule. */
export const UNAVAILABLE_SHARE_LIMIT = 0.001;
export const LAG_ZERO_WITHIN_MS = 10_000;
/** RSS moves with every GC cycle; a median of a few samples at each end keeps one cycle from deciding. */
export const RSS_ENDS_SAMPLES = 3;

export interface RssGrowth {
  service: 'ingress' | 'worker';
  /** Median of the first n post-warm-up samples and of the last n samples under load, MiB. */
  baselineMb: number;
  finalMb: number;
  /** Samples in each median. */
  n: number;
  growth: number;
  /** Requests sent from the middle of the first window to the middle of the last. */
  requests: number;
  /** RSS growth between the two windows per such request, bytes. */
  bytesPerRequest: number;
  pass: boolean;
}

const median = (values: number[]): number => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/**
 * Per service; the samples of the soak phase only (after the warm-up, before the load stops). A
 * share of the baseline alone lets a short run hide a leak (a 1 KiB-per-request leak over half a
 * minute grows a service by less than a tenth of its working size), so the growth is also divided
 * by the requests sent between the middles of the two windows.
 */
export function rssGrowth(samples: Pick<Sample, 'phase' | 'sent' | 'rssMb'>[]): RssGrowth[] {
  const soak = samples.filter((s) => s.phase === 'soak');
  const n = Math.min(RSS_ENDS_SAMPLES, Math.floor(soak.length / 2));
  const firstMiddle = Math.floor((n - 1) / 2);
  const lastMiddle = soak.length - n + firstMiddle;
  // Sample k counts what was sent in the window before it: from the middle sample of the first
  // window to that of the last is samples firstMiddle + 1 .. lastMiddle.
  const requests = n > 0 ? soak.slice(firstMiddle + 1, lastMiddle + 1).reduce((sum, s) => sum + s.sent, 0) : 0;
  return (['ingress', 'worker'] as const).map((service) => {
    const values = soak.map((s) => s.rssMb[service]);
    const baselineMb = n > 0 ? median(values.slice(0, n)) : NaN;
    const finalMb = n > 0 ? median(values.slice(-n)) : NaN;
    const growth = finalMb / baselineMb - 1;
    const bytesPerRequest = requests > 0 ? ((finalMb - baselineMb) * 2 ** 20) / requests : NaN;
    return {
      service,
      baselineMb,
      finalMb,
      n,
      growth,
      requests,
      bytesPerRequest,
      pass:
        Number.isFinite(growth) &&
        growth < RSS_GROWTH_LIMIT &&
        Number.isFinite(bytesPerRequest) &&
        bytesPerRequest < RSS_BYTES_PER_REQUEST_LIMIT,
    };
  });
}

export interface LatencyWindow {
  /** Wall ms, [from, to): requests due in it. */
  from: number;
  to: number;
  /** POST (due) -> applied record of its 2xx that have one, ms. */
  count: number;
  p99: number;
}

export interface LatencyDrift {
  windowMs: number;
  first: LatencyWindow;
  last: LatencyWindow;
  /** last.p99 / first.p99. */
  ratio: number;
  pass: boolean;
}

/** Half the soak, at most DRIFT_WINDOW_MS: the two windows never overlap. */
export function driftWindowMs(soakMs: number): number {
  return Math.min(DRIFT_WINDOW_MS, Math.floor(soakMs / 2));
}

/**
 * The p99 of POST -> applied over the requests due in the first window after the warm-up against
 * those due in the last window of the load. Per request, not a median of per-window p99s: a spike
 * every 20 s that grows with time is what this must catch. Either window empty fails.
 */
export function latencyDrift(input: {
  requests: Iterable<{ due: number; latencyMs: number }>;
  soakStart: number;
  loadEnd: number;
}): LatencyDrift {
  const windowMs = driftWindowMs(input.loadEnd - input.soakStart);
  const first = { from: input.soakStart, to: input.soakStart + windowMs, values: [] as number[] };
  const last = { from: input.loadEnd - windowMs, to: input.loadEnd, values: [] as number[] };
  for (const r of input.requests) {
    if (r.due >= first.from && r.due < first.to) first.values.push(r.latencyMs);
    if (r.due >= last.from && r.due < last.to) last.values.push(r.latencyMs);
  }
  const window = (w: typeof first): LatencyWindow => {
    const s = summarise(w.values);
    return { from: w.from, to: w.to, count: s.count, p99: s.p99 };
  };
  const a = window(first);
  const b = window(last);
  const ratio = b.p99 / a.p99;
  return { windowMs, first: a, last: b, ratio, pass: a.count > 0 && b.count > 0 && Number.isFinite(ratio) && ratio <= DRIFT_LIMIT };
}

export interface AchievedRate {
  /** Requests the schedule holds (rate x duration). */
  scheduled: number;
  /** Answered 2xx, over the whole run. */
  accepted: number;
  /** accepted / scheduled. */
  share: number;
  /** Answered 503. */
  unavailable: number;
  /** Both bounds: the 2xx share at least ACHIEVED_SHARE_FLOOR, 503s at most UNAVAILABLE_SHARE_LIMIT of the schedule. */
  pass: boolean;
}

export function achievedRate(input: { scheduled: number; answers: Iterable<{ status: number }> }): AchievedRate {
  let accepted = 0;
  let unavailable = 0;
  for (const a of input.answers) {
    if (a.status >= 200 && a.status < 300) accepted += 1;
    else if (a.status === 503) unavailable += 1;
  }
  const share = input.scheduled > 0 ? accepted / input.scheduled : NaN;
  return {
    scheduled: input.scheduled,
    accepted,
    share,
    unavailable,
    pass: share >= ACHIEVED_SHARE_FLOOR && unavailable <= Math.floor(input.scheduled * UNAVAILABLE_SHARE_LIMIT),
  };
}

export interface LagDrain {
  /** The lag at the first reading after the load stopped. */
  atStop: number;
  /** From the last request sent to the first reading of 0 taken after every request was answered, ms; NaN if never. */
  zeroAfterMs: number;
  readings: number;
  pass: boolean;
}

export function lagDrain(atStop: number, zeroAfterMs: number, readings: number): LagDrain {
  return { atStop, zeroAfterMs, readings, pass: Number.isFinite(zeroAfterMs) && zeroAfterMs <= LAG_ZERO_WITHIN_MS };
}

export interface Ledger {
  sent: number;
  accepted: number;
  /** Non-2xx answers by status ('no answer (ECONNRESET)' for a transport error). */
  rejected: Record<string, number>;
  /** 2xx whose event has a record on the applied topic. */
  applied: number;
  /** 2xx without an applied record; by the worker's inbox status when it has one, 'no inbox row' otherwise. */
  missing: Record<string, number>;
  /** Applied records of requests not answered 2xx. */
  extra: number;
  /** Applied records of an event id already seen (a republish). */
  duplicates: number;
  /** Applied records of event ids this run did not send, or without an event-id header. */
  foreign: number;
  /** accepted = applied records, each exactly once, and nothing else on the topic. */
  exact: boolean;
}

export interface LedgerInput {
  /** Every request of the run: its status (0: no answer), the transport error then, whether its
   * record was seen on the applied topic, and the worker's inbox status when it did not apply. */
  sent: Iterable<{ status: number; error?: string; applied: boolean; notApplied?: string }>;
  duplicates: number;
  /** Records without an event-id header, or of event ids this run did not send. */
  foreign: number;
}

export function ledger(input: LedgerInput): Ledger {
  const out: Ledger = {
    sent: 0,
    accepted: 0,
    rejected: {},
    applied: 0,
    missing: {},
    extra: 0,
    duplicates: input.duplicates,
    foreign: input.foreign,
    exact: false,
  };
  for (const s of input.sent) {
    out.sent += 1;
    if (s.status < 200 || s.status >= 300) {
      const key = s.status === 0 ? `no answer (${s.error ?? 'unknown'})` : String(s.status);
      out.rejected[key] = (out.rejected[key] ?? 0) + 1;
      if (s.applied) out.extra += 1;
      continue;
    }
    out.accepted += 1;
    if (s.applied) out.applied += 1;
    else {
      const why = s.notApplied ?? 'no inbox row';
      out.missing[why] = (out.missing[why] ?? 0) + 1;
    }
  }
  out.exact =
    out.accepted === out.applied && Object.keys(out.missing).length === 0 && out.extra === 0 && out.duplicates === 0 && out.foreign === 0;
  return out;
}

export interface SoakVerdicts {
  rss: RssGrowth[];
  lag: LagDrain;
  ledger: Ledger;
  drift: LatencyDrift;
  rate: AchievedRate;
}

/** One line per failed criterion; empty when the soak passes. */
export function failures(v: SoakVerdicts): string[] {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return [
    ...v.rss
      .filter((r) => !r.pass)
      .map((r) => `${r.service} RSS grew ${pct(r.growth)} (${Math.round(r.bytesPerRequest)} B per request over ${r.requests} requests)`),
    ...(v.lag.pass
      ? []
      : [
          `lag not 0 within 10 s after the load (${Number.isFinite(v.lag.zeroAfterMs) ? `${(v.lag.zeroAfterMs / 1000).toFixed(1)} s` : 'never'})`,
        ]),
    ...(v.ledger.exact ? [] : ['ledger not exact']),
    ...(v.drift.pass
      ? []
      : [
          `POST -> applied p99 drifted ${v.drift.ratio.toFixed(2)}x (${v.drift.first.p99.toFixed(0)} ms over ${v.drift.first.count} requests -> ${v.drift.last.p99.toFixed(0)} ms over ${v.drift.last.count})`,
        ]),
    ...(v.rate.pass
      ? []
      : [`${pct(v.rate.share)} of the ${v.rate.scheduled} scheduled requests answered 2xx, ${v.rate.unavailable} answered 503`]),
  ];
}
