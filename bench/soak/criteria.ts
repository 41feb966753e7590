// The soak's pass criteria: RSS after the warm-up grows less than 10% per service and less than
// 512 B per request (so a 1 KiB-per-request leak fails a short run too); the worker group's lag on
// the events topic is back to 0 within 10 s after the load stops; the ledger is exact (2xx answers =
// applied records); the schedule is answered 2xx (a bridge that refuses traffic keeps an exact
// ledger of nothing) with few 503s; and latency does not drift, judged on the samples' p99s so that
// one noisy sample cannot decide it. A run may report the drift without judging it, and loosen the
// lag bound to a liveness check (npm test's soak does both).
import type { Sample } from './sampler.ts';

export const RSS_GROWTH_LIMIT = 0.1;
/** Half the 1 KiB per request a leak must not hide under: the noise of a flat service is far below. */
export const RSS_BYTES_PER_REQUEST_LIMIT = 512;
export const DRIFT_LIMIT = 1.5;
/** The drift windows: 5 minutes each, or half the soak when it is shorter than 10 minutes. */
export const DRIFT_WINDOW_MS = 5 * 60_000;
/**
 * Which of a drift window's per-sample p99s stands for it: high enough to see spikes that come back
 * in a few of its samples, low enough that the highest few, one noisy sample among
 * them, are left out. Chosen against the recorded runs (bench/JOURNAL.md).
 */
export const DRIFT_WINDOW_PERCENTILE = 90;
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

export interface DriftWindow {
  /** The first and the last sample in it (Sample.index). */
  from: number;
  to: number;
  samples: number;
  /** Samples without an applied record: counted as slower than any other. */
  empty: number;
  /** The DRIFT_WINDOW_PERCENTILE-th percentile of the samples' POST -> applied p99s, ms; Infinity when empty samples reach it. */
  p99: number;
}

export interface LatencyDrift {
  /** Samples in each window. */
  windowSamples: number;
  first: DriftWindow;
  last: DriftWindow;
  /** last.p99 / first.p99. */
  ratio: number;
  pass: boolean;
  /** False when the run only reports the drift (--drift=report): it then never fails the run. */
  judged: boolean;
}

/** The samples of DRIFT_WINDOW_MS, at most half of the soak's: the two windows never overlap. */
export function driftWindowSamples(soakSamples: number, sampleMs: number): number {
  return Math.min(Math.floor(DRIFT_WINDOW_MS / sampleMs), Math.floor(soakSamples / 2));
}

/**
 * The per-sample p99s of POST -> applied in the first window after the warm-up against those in
 * the last window of the load, each window stood for by the DRIFT_WINDOW_PERCENTILE-th percentile of
 * its samples' p99s at the lower rank (for two samples or more, never the highest). A per-request p99
 * over a whole window lets a stall of a few seconds decide; a median of the samples misses spikes
 * that come back in only some of them. A sample with no applied record (nothing came through for a
 * whole sample of load) counts as slower than any: like the highest samples it is left out while it
 * is one of a few, and fails the window when there are more.
 * A window that has no figure fails the run.
 */
export function latencyDrift(input: {
  samples: Pick<Sample, 'index' | 'phase' | 'applied' | 'e2e'>[];
  sampleMs: number;
  judged?: boolean;
}): LatencyDrift {
  const soak = input.samples.filter((s) => s.phase === 'soak');
  const windowSamples = driftWindowSamples(soak.length, input.sampleMs);
  const window = (samples: typeof soak): DriftWindow => {
    const p99s = Float64Array.from(samples, (s) => (s.applied > 0 && Number.isFinite(s.e2e.p99) ? s.e2e.p99 : Infinity)).sort();
    return {
      from: samples[0]?.index ?? NaN,
      to: samples.at(-1)?.index ?? NaN,
      samples: samples.length,
      empty: p99s.filter((p) => p === Infinity).length,
      p99: p99s.length ? p99s[Math.floor((DRIFT_WINDOW_PERCENTILE / 100) * (p99s.length - 1))]! : NaN,
    };
  };
  const first = window(soak.slice(0, windowSamples));
  const last = window(windowSamples > 0 ? soak.slice(-windowSamples) : []);
  const ratio = last.p99 / first.p99;
  return {
    windowSamples,
    first,
    last,
    ratio,
    pass: Number.isFinite(first.p99) && Number.isFinite(ratio) && ratio <= DRIFT_LIMIT,
    judged: input.judged ?? true,
  };
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
  /** The bound: LAG_ZERO_WITHIN_MS unless the run sets another (--lag-zero-within-ms). */
  limitMs: number;
  /** The lag at the first reading after the load stopped. */
  atStop: number;
  /** From the last request sent to the first reading of 0 taken after every request was answered, ms; NaN if never. */
  zeroAfterMs: number;
  readings: number;
  pass: boolean;
}

export function lagDrain(atStop: number, zeroAfterMs: number, readings: number, limitMs = LAG_ZERO_WITHIN_MS): LagDrain {
  return { limitMs, atStop, zeroAfterMs, readings, pass: Number.isFinite(zeroAfterMs) && zeroAfterMs <= limitMs };
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

/** A drift window's figure for people: its milliseconds, or why there are none. */
export function windowP99(w: DriftWindow): string {
  if (Number.isFinite(w.p99)) return `${w.p99.toFixed(0)} ms`;
  return w.samples === 0 ? 'no samples' : `n/a (${w.empty} of ${w.samples} samples without an applied record)`;
}

/** One line per failed criterion (a drift only reported is none); empty when the soak passes. */
export function failures(v: SoakVerdicts): string[] {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return [
    ...v.rss
      .filter((r) => !r.pass)
      .map((r) => `${r.service} RSS grew ${pct(r.growth)} (${Math.round(r.bytesPerRequest)} B per request over ${r.requests} requests)`),
    ...(v.lag.pass
      ? []
      : [
          `lag not 0 within ${v.lag.limitMs / 1000} s after the load (${Number.isFinite(v.lag.zeroAfterMs) ? `${(v.lag.zeroAfterMs / 1000).toFixed(1)} s` : 'never'})`,
        ]),
    ...(v.ledger.exact ? [] : ['ledger not exact']),
    ...(v.drift.pass || !v.drift.judged
      ? []
      : [
          `POST -> applied p99 ${Number.isFinite(v.drift.first.p99) && Number.isFinite(v.drift.ratio) ? `drifted ${v.drift.ratio.toFixed(2)}x` : 'drift not measurable'} (p${DRIFT_WINDOW_PERCENTILE} of the per-sample p99s ${windowP99(v.drift.first)} over samples ${v.drift.first.from}-${v.drift.first.to} -> ${windowP99(v.drift.last)} over ${v.drift.last.from}-${v.drift.last.to})`,
        ]),
    ...(v.rate.pass
      ? []
      : [`${pct(v.rate.share)} of the ${v.rate.scheduled} scheduled requests answered 2xx, ${v.rate.unavailable} answered 503`]),
  ];
}
