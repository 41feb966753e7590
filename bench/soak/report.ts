// The soak's results file: the machine, versions and settings, the criteria, a summary, every
// sample in a table, the ledger.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import type { ResolvedPostgres } from '../../infra/provision/postgres.ts';
import type { TopicSettings } from '#plumbing/kafka/topics.ts';
import { BODY_BYTES } from '../e2e/load.ts';
import { fmt, summarise, type Summary } from '../lib/stats.ts';
import {
  ACHIEVED_SHARE_FLOOR,
  DRIFT_LIMIT,
  DRIFT_WINDOW_PERCENTILE,
  failures,
  RSS_BYTES_PER_REQUEST_LIMIT,
  RSS_GROWTH_LIMIT,
  UNAVAILABLE_SHARE_LIMIT,
  type AchievedRate,
  type LagDrain,
  type LatencyDrift,
  type Ledger,
  type RssGrowth,
  windowP99,
} from './criteria.ts';
import type { LoopDelay, Sample } from './sampler.ts';

export interface SoakRun {
  command: string;
  started: Date;
  rate: number;
  /** The rate without --rate / BENCH_SOAK_RATE: half of the measured peak. */
  defaultRate: number;
  durationMs: number;
  warmupMs: number;
  sampleMs: number;
  resources: number;
  drainTimeoutMs: number;
  lagPollMs: number;
  logLevel: string;
  brokers: string[];
  postgres: ResolvedPostgres;
  pgVersion: string;
  settings: TopicSettings;
  /** Each service's node arguments. */
  services: { ingress: string[]; worker: string[] };
  /** The event-loop probe preloaded into both, relative to the repository. */
  probe: string;
  loadBefore: number[];
  loadAfter: number[];
  otherRuns: string[];
  samples: Sample[];
  load: { started: number; lastDue: number; lastSent: number; sent: number };
  /** POST -> applied record of every 2xx due after the warm-up. */
  e2eSoak: Summary;
  drift: LatencyDrift;
  achieved: AchievedRate;
  lag: LagDrain;
  rss: RssGrowth[];
  rssPeakMb: { ingress: number; worker: number };
  rssSoakPeakMb: { ingress: number; worker: number };
  rssHwmMb: { ingress: number; worker: number };
  appliedWatch: { duplicates: number; foreign: number };
  drained: boolean;
  ledger: Ledger;
  inboxStatuses: Record<string, number>;
  exitCodes: { ingress: number | null; worker: number | null };
}

const n = (v: number) => v.toLocaleString('en');
const verdict = (ok: boolean) => (ok ? 'pass' : '**FAIL**');
const median = (values: number[]) => summarise(values.filter(Number.isFinite)).p50;
const maxOf = (values: number[]) => {
  const finite = values.filter(Number.isFinite);
  return finite.length ? Math.max(...finite) : NaN;
};

function versionOf(pkg: string): string {
  return (JSON.parse(readFileSync(path.join(repoRoot, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
}

function loopSummary(samples: Sample[], pick: (s: Sample) => LoopDelay | undefined): string {
  const windows = samples.map(pick).filter((d): d is LoopDelay => d !== undefined);
  if (!windows.length) return 'no answer from the probe';
  return `p99 per window median ${fmt(median(windows.map((w) => w.p99)), 1)} ms, highest ${fmt(maxOf(windows.map((w) => w.p99)), 1)} ms; longest single delay ${fmt(maxOf(windows.map((w) => w.max)), 1)} ms`;
}

function sampleRow(s: Sample): string {
  const loop = (d?: LoopDelay) => (d ? fmt(d.p99, 1) : '-');
  const c = s.cpu;
  return `| ${s.index} | ${fmt(s.t, 1)} | ${s.phase} | ${n(s.sent)} | ${n(s.accepted)} | ${s.rejected} | ${n(s.applied)} | ${fmt(s.e2e.p50, 0)} / ${fmt(s.e2e.p99, 0)} | ${Number.isFinite(s.lag) ? n(s.lag) : 'n/a'} | ${fmt(s.rssMb.ingress, 1)} / ${fmt(s.rssMb.worker, 1)} | ${loop(s.loop.ingress)} / ${loop(s.loop.worker)} | ${fmt(s.sendLateP99, 1)} | ${loop(s.bench.loop)} / ${fmt(s.bench.gcMs, 0)} / ${fmt(s.bench.gcMaxMs, 0)} / ${fmt(s.bench.heapMb, 0)} | ${fmt(c.ingress, 0)} / ${fmt(c.worker, 0)} / ${fmt(c.postgres, 0)} / ${fmt(c.kafka, 0)} / ${fmt(c.bench, 0)} / ${fmt(c.others, 0)} | ${s.otherRuns.length ? s.otherRuns.join(', ') : ''} |`;
}

export function renderReport(run: SoakRun, chartFile: string): string {
  const soak = run.samples.filter((s) => s.phase === 'soak');
  const underLoad = run.samples.filter((s) => s.phase !== 'drain');
  const cores = os.cpus().length;
  const achieved = ((run.load.sent - 1) * 1000) / (run.load.lastDue - run.load.started || 1);
  const l = run.ledger;
  const rejected = Object.entries(l.rejected);
  const missing = Object.entries(l.missing);
  const pass = failures({ rss: run.rss, lag: run.lag, ledger: l, drift: run.drift, rate: run.achieved }).length === 0;
  const d = run.drift;
  const a = run.achieved;
  const seconds = (index: number) => fmt((index * run.sampleMs) / 1000, 0);
  const driftWindow = (w: LatencyDrift['first']) =>
    `${windowP99(w)} over samples ${w.from}-${w.to} (${seconds(w.from - 1)}-${seconds(w.to)} s${w.empty ? `, ${w.empty} without an applied record` : ''})`;
  const driftVerdict = d.judged ? verdict(d.pass) : `not judged (--drift=report); ${d.pass ? 'within' : 'over'} the bound`;
  const firstSoak = soak[0]?.index ?? NaN;
  const lastSoak = soak.at(-1)?.index ?? NaN;
  const rssRow = (r: RssGrowth) =>
    `| ${r.service} RSS growth after the warm-up | **${r.growth >= 0 ? '+' : ''}${fmt(r.growth * 100, 1)}%**, **${fmt(r.bytesPerRequest, 0)} B per request** (${fmt(r.baselineMb, 1)} → ${fmt(r.finalMb, 1)} MiB: median of samples ${firstSoak}-${firstSoak + r.n - 1} → median of samples ${lastSoak - r.n + 1}-${lastSoak}; ${n(r.requests)} requests sent between their middles) | < ${RSS_GROWTH_LIMIT * 100}% and < ${RSS_BYTES_PER_REQUEST_LIMIT} B per request | ${verdict(r.pass)} |`;
  const cpuMedian = (pick: (s: Sample) => number) => `${fmt(median(soak.map(pick)), 0)}%`;
  const ledgerMeasured = `${n(l.accepted)} 2xx = ${n(l.applied)} applied records; ${missing.length ? `missing: ${missing.map(([k, v]) => `${v} ${k}`).join(', ')}` : '0 missing'}, ${l.extra} applied without a 2xx, ${l.duplicates} duplicates, ${l.foreign} foreign`;

  return `# Soak benchmark

Command: \`${run.command}\` (bench/soak/run.ts). Run: ${run.started.toISOString()}.

Machine: ${cores} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}.
Versions: Node ${process.version}, kafkajs ${versionOf('kafkajs')}, pg ${versionOf('pg')}, prom-client ${versionOf('prom-client')}, PostgreSQL ${run.pgVersion} (${run.postgres.origin}, ${run.postgres.adminUrl.replace(/\/\/([^:@/]*)(:[^@/]*)?@/, '//$1@')}),
Apache Kafka ${KAFKA_VERSION} (single local broker at ${run.brokers.join(',')}). Broker, Postgres, both services and the load generator share the machine.
Load average (1 / 5 / 15 min) before: ${run.loadBefore.map((v) => v.toFixed(2)).join(' / ')}; after: ${run.loadAfter.map((v) => v.toFixed(2)).join(' / ')}. Other test, typecheck, lint or benchmark
processes seen on the machine during the run (command lines sampled every second): ${run.otherRuns.length ? `**${run.otherRuns.join(', ')}**: the figures are not those of a quiet machine` : 'none'}; each sample below also gives the CPU share of processes other than the bench's.

Set-up (bench/lib/bridge.ts): a fresh database (migrated) and fresh topics (${run.settings.eventsPartitions} partitions, ${run.settings.retryLevels} retry levels), the ingress
(\`node ${run.services.ingress.join(' ').replaceAll(repoRoot + '/', '')}\`) and one worker applying to Postgres with its relay publishing to the applied topic (on the worker's event loop)
(\`node ${run.services.worker.join(' ').replaceAll(repoRoot + '/', '')}\`) as separate processes: npm start's Node flags and environment (infra/dev/dev.env;
LOG_LEVEL=${run.logLevel}, logs to a file), production defaults otherwise, plus the event-loop probe \`${run.probe}\` preloaded (below).

Load: one Node process, open loop (bench/soak/steady-load.ts: request i due at start + i / rate and sent then, whatever is still in flight; latency counts from
the due time) at **${n(run.rate)} req/s for ${fmt(run.durationMs / 60_000, 1)} min**, of which the first ${fmt(run.warmupMs / 1000, 0)} s are the warm-up (the same load, left out of the RSS baseline);
${BODY_BYTES} B hmac-sha256-signed theme.updated bodies, event ids \`evt_<a UUID per run>_<sequence number>\` (the bench finds a record's request from it), ${n(run.resources)} resource ids in round robin (more than the run sends: none repeats,
so every 2xx must apply). ${n(run.load.sent)} requests sent, ${fmt(achieved, 1)} req/s as scheduled. ${run.rate === run.defaultRate ? 'The rate is' : `The default rate, ${n(run.defaultRate)} req/s, is`} half of the highest rate sustained end to end
(bench/results/e2e.json), so the soak measures drift and growth rather than queueing; \`--rate=\` or BENCH_SOAK_RATE sets another.

How each figure is taken, every ${run.sampleMs / 1000} s on a grid from the first due time (sample k covers the ${run.sampleMs / 1000} s before it):
- **RSS**: each service's node process VmRSS (/proc/<pid>/status) at the sample.
  **Growth** compares the median of the first ${run.rss[0]?.n ?? 3} samples after the warm-up with the median of the last ${run.rss[0]?.n ?? 3} before the load stops (a median, so one GC
  cycle's high or low point does not decide it).
- **Event-loop delay**: the services register no prom-client default metrics (their /metrics has no \`nodejs_eventloop_lag_*\`), so \`${run.probe}\` is preloaded into
  each (\`--import\`, as a bundle of its own): \`perf_hooks.monitorEventLoopDelay\` at 10 ms resolution, as prom-client's default metrics
  measure it, one histogram on each service's main thread, read and reset over an IPC channel at each sample. Figures are the delay beyond the 10 ms timer period (prom-client's
  \`nodejs_eventloop_lag_p99_seconds\` would read 10 ms more). Main threads of the ingress and the worker.
- **Lag**: the worker's consumer group (\`bench-soak-applier-*\`) on the events topic, summed over partitions: high watermark minus committed offset
  (shared/plumbing/kafka/lag.ts; the worker commits after each chunk's transaction). **Back to 0**: after the last request is sent, the lag is read every
  ${run.lagPollMs} ms; the time counts from the last send to the first reading of 0 taken after every request was answered (an answer still in flight could
  yet add a record).
- **POST → applied record**: due time → received by the bench's own read_committed consumer of the applied topic (bench/e2e/observe.ts), over the records
  received in the window. No commit poller (bench:e2e's stage split is not needed here, and it adds 200 queries/s to Postgres).
- **Ledger**, over the whole run (warm-up included): every 2xx answer must have exactly one record on the applied topic, and nothing else may be there.
- **Drift**: the samples' POST → applied p99s in the last ${fmt((d.windowSamples * run.sampleMs) / 60_000, 1)} min of the load against those in the first ${fmt((d.windowSamples * run.sampleMs) / 60_000, 1)} min after
  the warm-up (5 minutes each, half the soak when it is shorter), each window stood for by the ${DRIFT_WINDOW_PERCENTILE}th percentile of its samples' p99s (lower rank:
  the highest few samples, one noisy sample among them, are left out; a sample with no applied record counts as the slowest). **Achieved rate**: 2xx answers over the whole schedule (rate × duration), and the 503s.
- **Bench**: this process sends the load and reads the applied topic, so a stall of its own counts in the latency: its event-loop delay p99 (beyond the 10 ms
  period), its GC pauses (sum and longest, PerformanceObserver 'gc') and its heap used. It keeps a few numbers per request in typed arrays, so its heap stays flat.
- **CPU**, % of one core over the window (/proc): ingress, worker, Postgres (all backends), broker, the bench process, and every other process on the machine.

## Results

| criterion | measured | limit | |
|---|---|---|---|
${run.rss.map(rssRow).join('\n')}
| lag back to 0 after the load stops | **${Number.isFinite(run.lag.zeroAfterMs) ? `${fmt(run.lag.zeroAfterMs / 1000, 2)} s` : `not within ${run.drainTimeoutMs / 1000} s`}** (lag ${Number.isFinite(run.lag.atStop) ? n(run.lag.atStop) : 'n/a'} at the first reading, ${run.lag.readings} reading${run.lag.readings === 1 ? '' : 's'}) | ≤ ${run.lag.limitMs / 1000} s | ${verdict(run.lag.pass)} |
| ledger: 2xx answers = applied records | ${ledgerMeasured} | exact | ${verdict(l.exact)} |
| POST → applied p99 does not drift | **${Number.isFinite(d.first.p99) ? fmt(d.ratio, 2) : 'n/a'}×**: p${DRIFT_WINDOW_PERCENTILE} of the per-sample p99s ${driftWindow(d.last)} against ${driftWindow(d.first)} | ≤ ${DRIFT_LIMIT}× | ${driftVerdict} |
| the schedule answered 2xx, few 503s | **${fmt(a.share * 100, 2)}%** of ${n(a.scheduled)} scheduled answered 2xx; **${n(a.unavailable)}** answered 503 | ≥ ${ACHIEVED_SHARE_FLOOR * 100}%; ≤ ${n(Math.floor(a.scheduled * UNAVAILABLE_SHARE_LIMIT))} (${UNAVAILABLE_SHARE_LIMIT * 100}%) | ${verdict(a.pass)} |

**${pass ? 'PASS' : 'FAIL'}**.

Over the soak (${soak.length} samples after the warm-up, before the load stopped):
- POST → applied record, every 2xx due after the warm-up: p50 ${fmt(run.e2eSoak.p50, 1)} ms, p99 **${fmt(run.e2eSoak.p99, 1)} ms**, max ${fmt(run.e2eSoak.max, 1)} ms (${n(run.e2eSoak.count)} events);
  p99 per window: median ${fmt(median(soak.map((s) => s.e2e.p99)), 1)} ms, highest ${fmt(maxOf(soak.map((s) => s.e2e.p99)), 1)} ms.
- Lag at the samples: median ${fmt(median(soak.map((s) => s.lag)), 0)}, highest ${fmt(maxOf(soak.map((s) => s.lag)), 0)} records.
- RSS: peak (VmRSS every second) ingress ${fmt(run.rssSoakPeakMb.ingress, 1)} MiB, worker ${fmt(run.rssSoakPeakMb.worker, 1)} MiB after the warm-up; ${fmt(run.rssPeakMb.ingress, 1)} / ${fmt(run.rssPeakMb.worker, 1)} MiB over the whole run (VmHWM ${fmt(run.rssHwmMb.ingress, 1)} / ${fmt(run.rssHwmMb.worker, 1)}).
- Event-loop delay: ingress ${loopSummary(soak, (s) => s.loop.ingress)}; worker main thread ${loopSummary(soak, (s) => s.loop.worker)}; the bench's own ${loopSummary(soak, (s) => s.bench.loop)}.
- The bench process: GC pauses per window median ${fmt(median(soak.map((s) => s.bench.gcMs)), 0)} ms, highest ${fmt(maxOf(soak.map((s) => s.bench.gcMs)), 0)} ms, longest single pause ${fmt(maxOf(soak.map((s) => s.bench.gcMaxMs)), 0)} ms; heap used ${fmt(soak[0]?.bench.heapMb ?? NaN, 0)} → ${fmt(soak.at(-1)?.bench.heapMb ?? NaN, 0)} MiB over the soak.
- CPU, median window (% of one core): ingress ${cpuMedian((s) => s.cpu.ingress)}, worker ${cpuMedian((s) => s.cpu.worker)}, Postgres ${cpuMedian((s) => s.cpu.postgres)}, broker ${cpuMedian((s) => s.cpu.kafka)}, bench ${cpuMedian((s) => s.cpu.bench)}; whole machine ${cpuMedian((s) => s.cpu.machine)} of ${cores * 100}%, of which ${cpuMedian((s) => s.cpu.others)} by other processes.
- The generator sent its requests ${fmt(maxOf(underLoad.map((s) => s.sendLateP99)), 1)} ms late at p99 in its worst window; non-2xx answers: ${rejected.length ? rejected.map(([k, v]) => `${v} ${k}`).join(', ') : 'none'}.

![The samples: RSS, POST → applied p99, lag and event-loop delay over time](${chartFile})

## Samples

Every ${run.sampleMs / 1000} s; sent / 2xx / non-2xx / applied are counts within the window, lag and RSS are read at its end. Loop: event-loop delay p99 of the
ingress / worker main thread (ms beyond the timer period). Bench: its event-loop delay p99 / GC pause sum / longest GC pause (ms) / heap used (MiB).
CPU: ingress / worker / Postgres / broker / bench / others, % of one core.

| # | t (s) | phase | sent | 2xx | non-2xx | applied | POST → applied p50 / p99 (ms) | lag | RSS ingress / worker (MiB) | loop p99 (ms) | sent late p99 (ms) | bench loop / GC / GC max / heap | CPU (%) | other runs |
|---:|---:|---|---:|---:|---:|---:|---|---:|---|---|---:|---|---|---|
${run.samples.map(sampleRow).join('\n')}

Ledger over the whole run: ${n(l.sent)} sent, ${n(l.accepted)} 2xx, non-2xx ${rejected.length ? rejected.map(([k, v]) => `${k}: ${v}`).join(', ') : 'none'}; ${n(l.applied)} of the 2xx have their applied record
(${missing.length ? missing.map(([k, v]) => `${v} missing, ${k}`).join('; ') : 'none missing'}), ${l.extra} applied records of requests not answered 2xx, ${l.duplicates} duplicate records,
${l.foreign} records of event ids this run did not send or without an event-id header. Every 2xx applied by the end of the drain (${run.drainTimeoutMs / 1000} s at most): ${run.drained ? 'yes' : '**no**'}.
Inbox outcomes in the worker's database: ${JSON.stringify(run.inboxStatuses)}. Exit codes after SIGTERM: ingress ${run.exitCodes.ingress}, worker ${run.exitCodes.worker}.
`;
}
