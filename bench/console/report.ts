// bench/results/console.md: the run's machine and settings, each page's median against its goal,
// and every round.
import type { Machine, Versions } from '../lib/results.ts';
import type { PageVerdict } from './pages.ts';

export interface ConsoleRound {
  round: number;
  /** One-minute load average as the round started. */
  loadAverage: number;
  /** Other test or benchmark runs seen on the machine during the round. */
  otherRuns: string[];
  /** Each page's time, request sent to body read, by page name. */
  ms: Record<string, number>;
  /** Records each dead-letter list page read from the broker, by page name. */
  recordsRead: Record<string, number>;
}

export interface ConsoleReport {
  ranAt: string;
  machine: Machine;
  versions: Versions;
  calibrationMs: { before: number; after: number };
  fillSeconds: number;
  rounds: ConsoleRound[];
  warmUp: Record<string, number>;
  verdicts: PageVerdict[];
  problems: string[];
  settings: { rounds: number; inboxRows: number; dlqRecords: number; partitions: number; dlqSpanDays: number; consoleNodeArgs: string };
}

const n = (v: number) => v.toLocaleString('en');
const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? 'n/a' : v.toFixed(v >= 100 ? 0 : 1));

export function renderReport(r: ConsoleReport): string {
  const m = r.machine;
  const v = r.versions;
  const s = r.settings;
  const reads = (name: string) => {
    const values = [...new Set(r.rounds.map((round) => round.recordsRead[name]).filter((x) => x !== undefined))];
    return values.length === 0 ? '' : values.map(n).join(', ');
  };
  const rows = r.verdicts.map(
    (p) =>
      `| ${p.name} | ${n(p.goalMs)} | **${ms(p.medianMs)}** | ${p.met ? 'met' : 'NOT met'} | ${r.rounds.map((round) => ms(round.ms[p.name])).join(' | ')} | ${ms(r.warmUp[p.name])} | ${reads(p.name)} |`,
  );
  const others = [...new Set(r.rounds.flatMap((round) => round.otherRuns))].sort();
  const met = r.verdicts.every((p) => p.met) && r.problems.length === 0;
  return `# Console pages benchmark

Run with \`npm run bench:console\` (bench/console/run.ts) on ${r.ranAt}.

Machine: ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB ?? '?'} GiB RAM; load average (1 min) ${m.loadAverage?.before ?? '?'} before,
${m.loadAverage?.after ?? '?'} after; CPU calibration ${r.calibrationMs.before} ms before, ${r.calibrationMs.after} ms after
(bench/lib/machine.ts). Node ${v.node}, Apache Kafka ${v.kafka ?? '?'} (the local broker), PostgreSQL ${v.postgres ?? '?'},
kafkajs ${v.kafkajs ?? '?'}. Other runs seen on the machine during the rounds: ${others.length ? others.join(', ') : 'none'}.

Data (test/kit/big-bridge.ts, as test/console/cheap-pages.test.ts fills it): ${n(s.inboxRows)} inbox rows over 30 days in a
fresh migrated database, and ${n(s.dlqRecords)} dead letters over ${s.dlqSpanDays} days on a fresh ${s.partitions}-partition DLQ topic;
filled in ${r.fillSeconds.toFixed(1)} s. The console runs from its bundle as \`npm start\` runs it
(\`node ${s.consoleNodeArgs}\`), alone: no ingress or worker. One warm-up round, then ${s.rounds} rounds, each requesting every
page once in this order; a page's time is from the request sent to its body read, on one keep-alive client on the same
machine. Every answer is checked (status 200 and the records it must show).

Goals: a page that reads Postgres only (search) answers within 250 ms, a page that also asks the broker
(overview, dead letters) within 1,000 ms, as the median of the rounds.

| page | goal ms | median ms | goal | ${r.rounds.map((round) => `round ${round.round} ms`).join(' | ')} | warm-up ms | records read from the DLQ |
| --- | --: | --: | --- | ${r.rounds.map(() => '--:').join(' | ')} | --: | --: |
${rows.join('\n')}

Load average (1 min) as each round started: ${r.rounds.map((round) => round.loadAverage).join(', ')}.
${r.problems.length ? `\nWrong answers:\n\n${r.problems.map((p) => `- ${p}`).join('\n')}\n` : ''}
Verdict: ${met ? 'every page within its goal' : 'NOT every page within its goal'}.
`;
}
