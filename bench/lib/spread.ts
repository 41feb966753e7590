// Figures a bench keeps over several runs: a ratio per run, its spread over the runs, and the
// list of runs a results file carries (bench:e2e keeps its recent runs, not only the latest).

/** numerator / denominator; NaN when either is missing or the denominator is not positive. */
export function ratio(numerator: number, denominator: number): number {
  if (!Number.isFinite(numerator) || !Number.isFinite(denominator) || denominator <= 0) return NaN;
  return numerator / denominator;
}

export interface Spread {
  /** How many finite values it is over. */
  count: number;
  min: number;
  /** The middle value (the mean of the two middle ones for an even count). */
  median: number;
  max: number;
}

/** Low, middle and high of the finite values; NaN throughout when there are none. */
export function spread(values: Iterable<number>): Spread {
  const sorted = [...values].filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return { count: 0, min: NaN, median: NaN, max: NaN };
  const median = n % 2 === 1 ? sorted[(n - 1) / 2]! : (sorted[n / 2 - 1]! + sorted[n / 2]!) / 2;
  return { count: n, min: sorted[0]!, median, max: sorted[n - 1]! };
}

/** The earlier runs with the latest appended, the oldest dropped beyond `limit`. */
export function keepRuns<T>(earlier: readonly T[], latest: T, limit: number): T[] {
  if (!(limit >= 1)) throw new Error(`keepRuns needs a limit of at least 1, got ${limit}`);
  return [...earlier, latest].slice(-limit);
}
