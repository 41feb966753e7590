// The COPY ceiling's part of bench/results/worker.md, from the rounds bench/worker/run.ts measured.
import os from 'node:os';
import type { CpuSnapshot } from '../lib/cpu.ts';
import type { CopyPlan } from './copy-plan.ts';
import { COPY_PHASES, type CopyCeilingRound, type CopyPhase } from './copy-write.ts';

interface RoundFigures {
  worker: { rate: number; consumedMs: number; cpu: CpuSnapshot | undefined };
  ceiling: { rate: number; ms: number; cpu: CpuSnapshot; counts: { resources: number; inbox: number; outbox: number } };
}

export const fmt = (n: number) => Math.round(n).toLocaleString('en');
export const pct = (n: number) => `${(n * 100).toFixed(0)}%`;
const medianOf = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;

/** The COPY ceiling's part of bench/results/worker.md: per round, the median, CPU, the split of its time, and what stands between. */
export function copyCeilingReport(
  rounds: readonly RoundFigures[],
  copy: readonly CopyCeilingRound[],
  plan: CopyPlan,
  concurrency: number,
): string {
  const us = (seconds: number) => fmt((seconds / plan.events) * 1e6);
  const byRate = copy.map((c, i) => ({ c, i })).sort((a, b) => a.c.rate - b.c.rate);
  const { c: mid, i: midRound } = byRate[Math.floor((byRate.length - 1) / 2)]!;
  const sqlMid = rounds[midRound]!.ceiling;
  const workerMid = rounds[midRound]!.worker;
  const phaseTotal = COPY_PHASES.reduce((s, p) => s + mid.phases[p], 0);
  const phase = (p: CopyPhase) => `${pct(mid.phases[p] / phaseTotal)}`;
  const cpuRow = (name: string, c: CpuSnapshot | undefined, ms: number) =>
    c === undefined
      ? `| ${name} | n/a | n/a | n/a | n/a | n/a |`
      : `| ${name} | ${us(c.child)} | ${us(c.postgres)} | ${us(c.kafka)} | ${us(c.child + c.postgres + c.kafka)} | ${(((c.child + c.postgres + c.kafka) / (ms / 1000)) * 100).toFixed(0)}% |`;
  const cores = os.cpus().length;
  const total = (c: CpuSnapshot) => c.child + c.postgres + c.kafka;
  const cap = (c: CpuSnapshot | undefined) => (c === undefined ? 'n/a' : fmt(cores / (total(c) / plan.events)));
  const busy = (c: CpuSnapshot, ms: number) => pct(total(c) / (ms / 1000));
  const diff = (a: CpuSnapshot | undefined, b: CpuSnapshot, k: keyof CpuSnapshot) => {
    if (a === undefined) return 'n/a';
    const d = ((a[k] - b[k]) / plan.events) * 1e6;
    return `${d >= 0 ? '+' : '-'}${fmt(Math.abs(d))}`;
  };
  const equal = rounds.every((r, i) => JSON.stringify(r.ceiling.counts) === JSON.stringify(copy[i]!.counts));
  return `
COPY ceiling: the same rows each chunk of the apply path writes (decided and encoded before the clock starts, ${fmt(plan.buildMs)} ms
of node for all ${fmt(plan.events)} events), COPY FROM STDIN in text format into the same migrated tables (same indexes, constraints and
defaults), one transaction per chunk of the worker's batch size (${fmt(plan.lanes.flat()[0]?.events ?? 0)} events), ${concurrency} connections sharing the lanes as the
same-SQL ceiling does (bench/worker/copy-ceiling.ts): ${fmt(plan.rows.inbox)} inbox_events rows, ${fmt(plan.rows.outbox)} applied_outbox rows,
${fmt(plan.rows.stateInserts)} resource_state inserts and ${fmt(plan.rows.stateUpdates)} new versions of existing state rows (COPY into a temporary
table, then one UPDATE ... FROM per chunk: COPY cannot replace a row), ${fmt(plan.rows.anomalies)} inbox_anomalies rows; ${(plan.bytes / 2 ** 20).toFixed(0)} MiB of COPY text.
A third run in each round, after the worker and the same-SQL ceiling (fresh database):

| round | worker events/s | same-SQL ceiling events/s | COPY ceiling events/s | worker / same-SQL | worker / COPY | same-SQL / COPY |
|---|---:|---:|---:|---:|---:|---:|
${rounds
  .map((r, i) => {
    const c = copy[i]!;
    return `| ${i + 1} | ${fmt(r.worker.rate)} | ${fmt(r.ceiling.rate)} | ${fmt(c.rate)} | ${pct(r.worker.rate / r.ceiling.rate)} | ${pct(r.worker.rate / c.rate)} | ${pct(r.ceiling.rate / c.rate)} |`;
  })
  .join('\n')}

COPY ceiling, median round: **${fmt(mid.rate)} events/s** (${(mid.ms / 1000).toFixed(2)} s). Worker / COPY ceiling: **${pct(medianOf(rounds.map((r, i) => r.worker.rate / copy[i]!.rate)))}**, the median of
the rounds' ratios (worker / same-SQL ceiling ${pct(medianOf(rounds.map((r) => r.worker.rate / r.ceiling.rate)))}, same-SQL / COPY ${pct(medianOf(rounds.map((r, i) => r.ceiling.rate / copy[i]!.rate)))}).

CPU per event in the median COPY round and the same round's other two runs (/proc), in microseconds:
| run | node process | Postgres (all backends) | Kafka broker | total | cores busy (of 200%) |
|---|---|---|---|---|---|
${cpuRow(`worker, first fetch -> last commit (round ${midRound + 1})`, workerMid.cpu, workerMid.consumedMs)}
${cpuRow(`same-SQL ceiling (round ${midRound + 1})`, sqlMid.cpu, sqlMid.ms)}
${cpuRow(`COPY ceiling (round ${midRound + 1}; rows prebuilt)`, mid.cpu, mid.ms)}

COPY ceiling's own backends: ${us(mid.backendCpu)} us of Postgres CPU per event. Its statement time (summed over chunks and connections):
inbox COPY ${phase('inbox')}, outbox COPY ${phase('outbox')}, state inserts ${phase('stateInsert')}, staging the new state versions
${phase('stateStage')} and their UPDATE ${phase('stateUpdate')}, BEGIN ${phase('begin')}, COMMIT (WAL flush) ${phase('commit')}.
Rows: COPY ceiling ${JSON.stringify(mid.counts)}; ${equal ? 'equal to the same-SQL ceiling in every round' : '**NOT equal to the same-SQL ceiling in every round**'}.

What stands between the worker and the COPY ceiling, per event from the CPU table above (at ${cores} cores, the CPU each
event takes caps the rate at worker ${cap(workerMid.cpu)}/s, same-SQL ceiling ${cap(sqlMid.cpu)}/s, COPY ceiling ${cap(mid.cpu)}/s):
- same-SQL -> COPY: ${diff(sqlMid.cpu, mid.cpu, 'child')} us of node CPU (the apply path parses, decides and encodes on the clock;
  the COPY ceiling did that beforehand, ${us(plan.buildMs / 1000)} us per event) and ${diff(sqlMid.cpu, mid.cpu, 'postgres')} us of Postgres CPU (the store's
  statements instead of COPY: key locks, the read, unnest and packed-bytea decoding, the ON CONFLICT upserts and their
  version check; \`npx tsx bench/worker/copy-ceiling.ts\` splits it statement by statement);
- worker -> same-SQL: ${diff(workerMid.cpu, sqlMid.cpu, 'child')} us of node CPU in the worker process (Kafka fetch decoding and offset commits, the
  relay publishing every applied record, a pino line per event), ${diff(workerMid.cpu, sqlMid.cpu, 'kafka')} us of broker CPU and
  Postgres CPU ${diff(workerMid.cpu, sqlMid.cpu, 'postgres')} us (the worker's run adds the relay's reads and cursor rows; within noise when near 0).
Our processes kept ${[workerMid.cpu && busy(workerMid.cpu, workerMid.consumedMs), busy(sqlMid.cpu, sqlMid.ms), busy(mid.cpu, mid.ms)].map((b) => b ?? 'n/a').join(' / ')} of ${cores * 100}% busy
in those three runs; well below ${cores * 100}%, other processes on the machine had the rest.
`;
}
