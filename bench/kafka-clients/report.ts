// From the children's results to the figures: each client's value per path and round, the ratio
// platformatic / kafkajs of every round, and whether @platformatic/kafka wins a hot path by the
// margin the issue set for a switch (docs/architecture.md, "The Kafka client").
import type { BenchResult, Figure } from '../lib/results.ts';
import { fmt } from '../lib/stats.ts';
import type { ChildResult, Path } from './child.ts';
import type { ClientName } from './clients.ts';

export interface RoundResult extends ChildResult {
  round: number;
  /** ingress: the records on the topic equal those acknowledged; relay: read_committed finds exactly those committed. */
  ledgerOk?: boolean;
}

export interface Metric {
  path: Path;
  label: string;
  unit: string;
  /** Which way is better. */
  better: 'higher' | 'lower';
  /** Counts toward the switch: a hot path's throughput or the ingress's latency. */
  decides: boolean;
  value: (r: ChildResult) => number | undefined;
}

export const METRICS: Metric[] = [
  { path: 'ingress', label: 'ingress records/s', unit: 'records/s', better: 'higher', decides: true, value: (r) => r.recordsPerSecond },
  { path: 'ingress', label: 'ingress send p50', unit: 'ms', better: 'lower', decides: false, value: (r) => r.latencyMs?.p50 },
  { path: 'ingress', label: 'ingress send p99', unit: 'ms', better: 'lower', decides: true, value: (r) => r.latencyMs?.p99 },
  { path: 'ingress', label: 'ingress CPU per record', unit: 'µs', better: 'lower', decides: false, value: (r) => r.cpuUsPerRecord },
  { path: 'ingress', label: 'ingress peak RSS', unit: 'MiB', better: 'lower', decides: false, value: (r) => r.peakRssMb },
  { path: 'fetch', label: 'fetch records/s', unit: 'records/s', better: 'higher', decides: true, value: (r) => r.recordsPerSecond },
  { path: 'fetch', label: 'fetch CPU per record', unit: 'µs', better: 'lower', decides: false, value: (r) => r.cpuUsPerRecord },
  { path: 'fetch', label: 'fetch peak RSS', unit: 'MiB', better: 'lower', decides: false, value: (r) => r.peakRssMb },
  { path: 'relay', label: 'relay transactions/s', unit: 'tx/s', better: 'higher', decides: true, value: (r) => r.transactionsPerSecond },
  { path: 'relay', label: 'relay records/s', unit: 'records/s', better: 'higher', decides: false, value: (r) => r.recordsPerSecond },
  { path: 'relay', label: 'relay CPU per record', unit: 'µs', better: 'lower', decides: false, value: (r) => r.cpuUsPerRecord },
  { path: 'relay', label: 'relay peak RSS', unit: 'MiB', better: 'lower', decides: false, value: (r) => r.peakRssMb },
];

/** The switch margin: platformatic at least this much better, in every round. */
export const WIN_MARGIN = 1.2;

function valueOf(results: readonly RoundResult[], metric: Metric, client: ClientName, round: number): number {
  const r = results.find((x) => x.client === client && x.path === metric.path && x.round === round);
  // A failed run has no figure: it neither wins nor loses on speed, it fails.
  if (r === undefined || r.errors.length > 0 || r.ledgerOk === false) return NaN;
  return metric.value(r) ?? NaN;
}

export interface MetricComparison {
  metric: Metric;
  kafkajs: number[];
  platformatic: number[];
  /** platformatic / kafkajs per round. */
  ratios: number[];
  /** How much better platformatic is per round (ratio, or its inverse where lower is better). */
  advantage: number[];
  /** platformatic better by WIN_MARGIN in every round. */
  wins: boolean;
}

export function compare(results: readonly RoundResult[]): MetricComparison[] {
  const rounds = [...new Set(results.map((r) => r.round))].sort((a, b) => a - b);
  const paths = new Set(results.map((r) => r.path));
  return METRICS.filter((m) => paths.has(m.path)).map((metric) => {
    const kafkajs = rounds.map((n) => valueOf(results, metric, 'kafkajs', n));
    const platformatic = rounds.map((n) => valueOf(results, metric, 'platformatic', n));
    const ratios = rounds.map((_, i) => platformatic[i]! / kafkajs[i]!);
    const advantage = ratios.map((q) => (metric.better === 'higher' ? q : 1 / q));
    const wins = advantage.length > 0 && advantage.every((a) => Number.isFinite(a) && a >= WIN_MARGIN);
    return { metric, kafkajs, platformatic, ratios, advantage, wins };
  });
}

/** The hot-path metrics on which platformatic wins by the margin. */
export function wins(comparisons: readonly MetricComparison[]): string[] {
  return comparisons.filter((c) => c.metric.decides && c.wins).map((c) => c.metric.label);
}

/** The results file's summary: each client's figure and the ratio, over the rounds. */
export function summaryFigures(comparisons: readonly MetricComparison[]): Figure[] {
  return comparisons.flatMap((c) => [
    { label: `kafkajs ${c.metric.label}`, unit: c.metric.unit, values: c.kafkajs.map(round3) },
    { label: `platformatic ${c.metric.label}`, unit: c.metric.unit, values: c.platformatic.map(round3) },
    {
      label: `ratio platformatic / kafkajs, ${c.metric.label}`,
      unit: '',
      values: c.ratios.map(round3),
      ...(c.metric.decides
        ? { target: c.metric.better === 'higher' ? `≥ ${WIN_MARGIN} to switch` : `≤ ${round3(1 / WIN_MARGIN)} to switch` }
        : {}),
    },
  ]);
}

function round3(n: number): number {
  if (!Number.isFinite(n)) return n;
  const digits = Math.abs(n) >= 100 ? 0 : 3;
  return Number(n.toFixed(digits));
}

/** A rate or a duration at a precision that suits its size. */
function figure(n: number | undefined): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return n === undefined ? '' : 'n/a';
  return Math.abs(n) >= 1000 ? Math.round(n).toLocaleString('en') : fmt(n, Math.abs(n) >= 100 ? 0 : 1);
}

function range(values: readonly number[]): string {
  const finite = values.filter((v) => v !== null && Number.isFinite(v));
  if (finite.length === 0) return 'n/a';
  const low = figure(Math.min(...finite));
  const high = figure(Math.max(...finite));
  return low === high ? low : `${low}–${high}`;
}

/** bench/results/kafka-clients.md from the results file: every round, then the ratios and the verdict. */
export function renderReport(result: BenchResult): string {
  const rounds = result.rounds as unknown as RoundResult[];
  const comparisons = compare(rounds.map((r) => ({ ...r, errors: r.errors ?? [] })));
  const won = wins(comparisons);
  const m = result.machine;
  const v = result.versions;
  const s = result.settings as { brokers?: number; replicationFactor?: number };
  const rows = rounds.map((r) =>
    [
      r.round,
      r.path,
      r.client,
      figure(r.recordsPerSecond),
      figure(r.transactionsPerSecond),
      figure(r.latencyMs?.p50),
      figure(r.latencyMs?.p99),
      figure(r.cpuUsPerRecord),
      figure(r.peakRssMb),
      r.errors.join('; ').replaceAll('|', '/').replaceAll('\n', ' ').slice(0, 200),
    ].join(' | '),
  );
  const ratioRows = comparisons.map((c) =>
    [
      c.metric.label,
      c.metric.unit,
      c.metric.better,
      range(c.kafkajs),
      range(c.platformatic),
      c.ratios.map((q) => fmt(q, 2)).join(', '),
      c.metric.decides ? (c.wins ? 'yes' : 'no') : '',
    ].join(' | '),
  );
  return `# kafkajs and @platformatic/kafka on the bridge's hot paths

\`${result.command}\`, ${result.ranAt}. ${m.cpus} × ${m.cpuModel}${m.loadAverage ? `; load average ${m.loadAverage.before} before, ${m.loadAverage.after} after` : ''}${
    result.calibrationMs ? `; CPU calibration ${result.calibrationMs.before} ms before, ${result.calibrationMs.after} ms after` : ''
  }. Node ${v.node}, Apache Kafka ${v.kafka ?? '?'} (${s.brokers ?? '?'} broker(s), replication ${s.replicationFactor ?? '?'}), kafkajs ${v.kafkajs ?? '?'}
(with patches/kafkajs+2.2.4.patch), @platformatic/kafka ${v.platformaticKafka ?? '?'}. ${new Set(rounds.map((r) => r.round)).size} rounds, the
clients alternating; each path of each client in a process of its own. Settings: \`${JSON.stringify(result.settings)}\`.

## Every round

| round | path | client | records/s | tx/s | send p50 ms | send p99 ms | CPU µs/record | peak RSS MiB | errors |
| --: | --- | --- | --: | --: | --: | --: | --: | --: | --- |
${rows.map((r) => `| ${r} |`).join('\n')}

## Ratios platformatic / kafkajs

A switch needs platformatic better by ${WIN_MARGIN}× or more on a hot path (its throughput, or the ingress's p99) in every
round, and every reliability test passing with it. Wins by that margin: ${won.length ? won.join(', ') : 'none'}.

| figure | unit | better | kafkajs | platformatic | ratio per round | wins by ${WIN_MARGIN}× |
| --- | --- | --- | --: | --: | --- | --- |
${ratioRows.map((r) => `| ${r} |`).join('\n')}
`;
}
