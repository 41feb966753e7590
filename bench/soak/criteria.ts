// The soak's pass criteria (issue 12): RSS after the warm-up grows less than 10% per service, the
// worker group's lag on the events topic is back to 0 within 10 s after the load stops, and the
// ledger is exact (2xx answers = applied records).
import type { Sample } from './sampler.ts';

export const RSS_GROWTH_LIMIT = 0.1;
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
  pass: boolean;
}

const median = (values: number[]): number => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** Per service; the samples of the soak phase only (after the warm-up, before the load stops). */
export function rssGrowth(samples: Sample[]): RssGrowth[] {
  const soak = samples.filter((s) => s.phase === 'soak');
  const n = Math.min(RSS_ENDS_SAMPLES, Math.floor(soak.length / 2));
  return (['ingress', 'worker'] as const).map((service) => {
    const values = soak.map((s) => s.rssMb[service]);
    const baselineMb = n > 0 ? median(values.slice(0, n)) : NaN;
    const finalMb = n > 0 ? median(values.slice(-n)) : NaN;
    const growth = finalMb / baselineMb - 1;
    return { service, baselineMb, finalMb, n, growth, pass: Number.isFinite(growth) && growth < RSS_GROWTH_LIMIT };
  });
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
  sent: Iterable<{ eventId: string; status: number; error?: string }>;
  appliedIds: ReadonlySet<string> | ReadonlyMap<string, unknown>;
  duplicates: number;
  unlabelled: number;
  /** The inbox status of events the worker did not apply (not 'applied'). */
  notApplied: ReadonlyMap<string, string>;
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
    foreign: input.unlabelled,
    exact: false,
  };
  const ours = new Set<string>();
  for (const s of input.sent) {
    out.sent += 1;
    ours.add(s.eventId);
    const hasRecord = input.appliedIds.has(s.eventId);
    if (s.status < 200 || s.status >= 300) {
      const key = s.status === 0 ? `no answer (${s.error ?? 'unknown'})` : String(s.status);
      out.rejected[key] = (out.rejected[key] ?? 0) + 1;
      if (hasRecord) out.extra += 1;
      continue;
    }
    out.accepted += 1;
    if (hasRecord) out.applied += 1;
    else {
      const why = input.notApplied.get(s.eventId) ?? 'no inbox row';
      out.missing[why] = (out.missing[why] ?? 0) + 1;
    }
  }
  for (const id of input.appliedIds.keys()) if (!ours.has(id)) out.foreign += 1;
  out.exact =
    out.accepted === out.applied && Object.keys(out.missing).length === 0 && out.extra === 0 && out.duplicates === 0 && out.foreign === 0;
  return out;
}
