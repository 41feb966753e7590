// Percentiles of latency samples, as the benchmarks report them (nearest rank, lower side).

export interface Summary {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

/** The value at rank floor(p/100 * n) of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function summarise(values: Iterable<number>): Summary {
  const sorted = Float64Array.from(values).sort();
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
  };
}

/** A number with `digits` decimals, or n/a. */
export function fmt(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : 'n/a';
}
