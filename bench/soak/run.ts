// npm run bench:soak: the bridge as `npm start` runs it (bench/lib/bridge.ts: the ingress and a
// worker applying to Postgres with its relay publishing, fresh database and topics), driven open
// loop at a steady rate for 20 minutes (bench/soak/steady-load.ts), sampled every 10 s
// (bench/soak/sampler.ts: RSS, event-loop delay, the worker group's lag, POST -> applied p99).
// Passes when each service's RSS after the warm-up grows less than 10% and less than 512 B per
// request, the lag is 0 within 10 s after the load stops, the ledger is exact, the POST -> applied
// p99 does not drift (the 90th percentile of the per-sample p99s in the last 5 minutes of load within
// 1.5x of that in the first 5 after the warm-up), at least 99% of the schedule is answered 2xx and at
// most 0.1% 503 (bench/soak/criteria.ts). --drift=report prints the drift without judging it, and
// --lag-zero-within-ms= sets another lag bound: a short run on a busy machine (test/soak) judges
// behaviour, not speed. Writes the results file, its JSON (bench/lib/results.ts) and an SVG of the
// samples beside it.
// Exits 0 when every criterion passes, 1 when one fails or the run breaks, 2 on bad arguments.
//
//   npm run bench:soak [-- --rate=500 --duration-ms=1200000 --warmup-ms=120000 --sample-ms=10000 --out=bench/results/soak.md
//                          --drift=judge|report --lag-zero-within-ms=10000]
// Environment (the flags win): BENCH_SOAK_RATE, BENCH_SOAK_DURATION_MS, BENCH_SOAK_WARMUP_MS,
// BENCH_SOAK_SAMPLE_MS, BENCH_SOAK_OUT, BENCH_SOAK_DRIFT, BENCH_SOAK_LAG_ZERO_WITHIN_MS,
// BENCH_DRAIN_TIMEOUT_MS (default 60 s, at least the lag bound), BENCH_RESOURCES, BENCH_LOG_LEVEL,
// BENCH_KEEP=1 (keep the database and topics), KAFKA_BROKERS, DATABASE_URL (an admin URL).
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadDevEnv } from '../../infra/dev/bootstrap.ts';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { brokerReady, parseBrokers } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { ancestorPids, startBridge, waitReady, type BenchBridge } from '../lib/bridge.ts';
import { OtherRunsWatch } from '../lib/machine.ts';
import { procStatusMb, RssSampler } from '../lib/rss.ts';
import { fmt, summarise } from '../lib/stats.ts';
import { eventFactory, wallNow } from '../e2e/load.ts';
import { watchAppliedLog, type AppliedLog } from './applied-log.ts';
import { renderChart } from './chart.ts';
import { achievedRate, failures, LAG_ZERO_WITHIN_MS, lagDrain, latencyDrift, ledger, rssGrowth } from './criteria.ts';
import { renderReport, type SoakRun } from './report.ts';
import { machineNow, versionsNow, writeBenchResult } from '../lib/results.ts';
import { Sampler, totalLag, type SamplePhase } from './sampler.ts';
import { RequestLog, steadyLoad } from './steady-load.ts';
import { buildBundles } from '../../infra/build/build.ts';

const { values: flags } = parseArgs({
  options: {
    rate: { type: 'string' },
    'duration-ms': { type: 'string' },
    'warmup-ms': { type: 'string' },
    'sample-ms': { type: 'string' },
    out: { type: 'string' },
    drift: { type: 'string' },
    'lag-zero-within-ms': { type: 'string' },
  },
  allowPositionals: false,
});
const env = process.env;
// Half of the highest rate sustained end to end (bench/results/e2e.json): above it requests queue at
// the ingress, and a soak is after drift and growth, not queueing.
const DEFAULT_RATE = 500;
const RATE = Number(flags.rate ?? env.BENCH_SOAK_RATE ?? DEFAULT_RATE);
const DURATION_MS = Number(flags['duration-ms'] ?? env.BENCH_SOAK_DURATION_MS ?? 20 * 60_000);
// The warm-up is the start of the same load, left out of the RSS baseline: half the run, at most 2 minutes (2 min of a
// 20-min run, 1 min of a 2-min one). Each service's RSS climbs to its working size early in a run and then holds; a
// baseline taken on the climb would read as growth.
const WARMUP_MS = Number(flags['warmup-ms'] ?? env.BENCH_SOAK_WARMUP_MS ?? Math.min(120_000, DURATION_MS / 2));
const SAMPLE_MS = Number(flags['sample-ms'] ?? env.BENCH_SOAK_SAMPLE_MS ?? 10_000);
const OUT = path.resolve(flags.out ?? env.BENCH_SOAK_OUT ?? path.join(repoRoot, 'bench', 'results', 'soak.md'));
const CHART = OUT.replace(/\.md$/, '') + '.svg';
const DRIFT = flags.drift ?? env.BENCH_SOAK_DRIFT ?? 'judge';
const LAG_ZERO_MS = Number(flags['lag-zero-within-ms'] ?? env.BENCH_SOAK_LAG_ZERO_WITHIN_MS ?? LAG_ZERO_WITHIN_MS);
// The lag is watched until the drain times out: never shorter than its bound.
const DRAIN_TIMEOUT_MS = Number(env.BENCH_DRAIN_TIMEOUT_MS ?? Math.max(60_000, LAG_ZERO_MS));
const LAG_POLL_MS = 250;
const RSS_SAMPLE_MS = 1000;
// More ids than the run sends: no resource repeats, so every 2xx must apply (none can be stale).
const RESOURCES = Number(env.BENCH_RESOURCES ?? Math.max(100_000, Math.ceil((RATE * DURATION_MS) / 1000) + 1));
const KEEP = env.BENCH_KEEP === '1';
if (
  !(RATE > 0) ||
  !(DURATION_MS > 0) ||
  !(WARMUP_MS >= 0) ||
  !(WARMUP_MS < DURATION_MS) ||
  !(SAMPLE_MS >= 1000) ||
  !(RESOURCES > 0) ||
  (DRIFT !== 'judge' && DRIFT !== 'report') ||
  !(LAG_ZERO_MS > 0) ||
  !(DRAIN_TIMEOUT_MS >= LAG_ZERO_MS)
) {
  console.error(
    'usage: npm run bench:soak [-- --rate=500 --duration-ms=1200000 --warmup-ms=120000 --sample-ms=10000 --out=bench/results/soak.md',
  );
  console.error('                           --drift=judge|report --lag-zero-within-ms=10000]');
  console.error('       (rate > 0, 0 <= warm-up < duration, sample >= 1000 ms, lag bound > 0 and <= BENCH_DRAIN_TIMEOUT_MS)');
  process.exit(2);
}
if ((DURATION_MS - WARMUP_MS) / SAMPLE_MS < 4) {
  console.error(`the soak after the warm-up (${(DURATION_MS - WARMUP_MS) / 1000} s) needs at least 4 samples of ${SAMPLE_MS / 1000} s`);
  process.exit(2);
}

const log = (line: string) => console.error(`[bench:soak] ${line}`);
loadDevEnv(); // as npm start: the dev sources and their secrets, LOG_LEVEL=info; variables already set win
const brokers = parseBrokers(env.KAFKA_BROKERS ?? DEFAULTS.dev.kafkaBrokers);
const logger = createLogger({ name: 'bench-soak', level: 'warn' });
const logLevel = env.BENCH_LOG_LEVEL ?? env.LOG_LEVEL ?? 'info';
if (!(await brokerReady(brokers))) {
  console.error(`no Kafka broker answers at ${brokers.join(',')} (npm run kafka:start, or set KAFKA_BROKERS)`);
  process.exit(1);
}

const ourPids = ancestorPids();
const otherRunsWholeRun = new OtherRunsWatch(() => ourPids);
const otherRunsWindow = new OtherRunsWatch(() => ourPids);
const loadBefore = os.loadavg();
const runStarted = new Date();
// The probe is preloaded into each service's bundle, so it is a bundle too.
const probe = (await buildBundles(['bench/soak/loop-probe.ts']))[0]!;

const bridge: BenchBridge = await startBridge({
  name: 'soak',
  brokers,
  logger,
  log,
  logLevel,
  extraNodeArgs: ['--import', probe],
  ipc: true,
  keep: KEEP,
});
const { ingress, worker } = bridge;
// Stopped from outside (Ctrl-C, a test's timeout): stop the services too, never leave them running.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping the services`);
    void bridge.stop().finally(() => process.exit(1));
  });
}
const readerGroup = `bench-soak-reader-${bridge.stamp}`;
const rss = new RssSampler({ ingress: ingress.pid, worker: worker.pid }, RSS_SAMPLE_MS);
let applied: AppliedLog | undefined;
const requests = new RequestLog({ rate: RATE, durationMs: DURATION_MS, warmupMs: WARMUP_MS });
let failure: unknown;
let run:
  | Omit<
      SoakRun,
      'pgVersion' | 'inboxStatuses' | 'ledger' | 'exitCodes' | 'rssHwmMb' | 'rssPeakMb' | 'rssSoakPeakMb' | 'loadAfter' | 'otherRuns'
    >
  | undefined;
const notApplied = new Map<string, string>();

try {
  await Promise.all([waitReady(ingress), waitReady(worker)]);
  log(`ingress (pid ${ingress.pid}) and worker (pid ${worker.pid}) ready`);
  applied = await watchAppliedLog(bridge.kafka, bridge.settings.applied, readerGroup, requests);

  const warmupSamples = Math.floor(WARMUP_MS / SAMPLE_MS);
  const loadSamples = Math.ceil(DURATION_MS / SAMPLE_MS);
  // By index, not by clock: sample k covers ((k - 1) * SAMPLE_MS, k * SAMPLE_MS] after the first due time.
  const phaseOf = (index: number): SamplePhase => (index <= warmupSamples ? 'warm-up' : index <= loadSamples ? 'soak' : 'drain');
  const load = steadyLoad({
    port: bridge.ingressPort,
    path: '/webhooks/demo',
    requests,
    factory: eventFactory(env.DEMO_SECRET!, RESOURCES, { eventIdPrefix: requests.prefix }),
  });
  const sampler = new Sampler({
    load,
    applied,
    admin: bridge.admin,
    group: bridge.workerGroup,
    topic: bridge.settings.events,
    services: { ingress, worker },
    otherRuns: otherRunsWindow,
    phaseOf,
  });
  sampler.reset();
  rss.window(WARMUP_MS > 0 ? 'warm-up' : 'soak');
  log(`${RATE} req/s for ${DURATION_MS / 1000} s (warm-up ${WARMUP_MS / 1000} s), a sample every ${SAMPLE_MS / 1000} s`);

  let answered = false;
  void load.allAnswered.then(() => (answered = true));
  let loadStopped: { lastDue: number; lastSent: number } | undefined;
  // After the load: the lag from the first reading, and the first reading of 0 once every request is answered.
  const lagWatch = load.sendingDone.then(async (stopped) => {
    loadStopped = stopped;
    rss.window('drain');
    let atStop = NaN;
    let readings = 0;
    const deadline = stopped.lastSent + DRAIN_TIMEOUT_MS;
    while (wallNow() < deadline) {
      const lag = await totalLag(bridge.admin, bridge.workerGroup, bridge.settings.events);
      readings += 1;
      if (readings === 1) atStop = lag;
      if (answered && lag === 0) return lagDrain(atStop, wallNow() - stopped.lastSent, readings, LAG_ZERO_MS);
      await new Promise((r) => setTimeout(r, LAG_POLL_MS));
    }
    return lagDrain(atStop, NaN, readings, LAG_ZERO_MS);
  });
  const drained = () => {
    if (loadStopped === undefined || !answered) return false;
    for (let i = 0; i < requests.sent; i += 1) if (requests.accepted(i) && Number.isNaN(applied!.received[i]!)) return false;
    return true;
  };

  // Samples on a fixed grid from the first due time, on through the drain until every 2xx is applied.
  let lagResult: Awaited<typeof lagWatch> | undefined;
  void lagWatch.then((r) => (lagResult = r));
  for (let k = 1; ; k += 1) {
    const at = load.started + k * SAMPLE_MS;
    await new Promise((r) => setTimeout(r, Math.max(0, at - wallNow())));
    const sample = await sampler.take();
    if (sample.phase === 'warm-up' && phaseOf(k + 1) === 'soak') rss.window('soak');
    const loop = (d?: { p99: number }) => (d ? fmt(d.p99, 1) : '-');
    log(
      `t=${fmt(sample.t, 0)} s ${sample.phase}: ${sample.sent} sent, ${sample.accepted} 2xx${sample.rejected ? `, ${sample.rejected} other answers` : ''}, ${sample.applied} applied, e2e p99 ${fmt(sample.e2e.p99, 0)} ms, lag ${sample.lag}, RSS ${fmt(sample.rssMb.ingress, 0)} / ${fmt(sample.rssMb.worker, 0)} MB, loop p99 ${loop(sample.loop.ingress)} / ${loop(sample.loop.worker)} ms, bench loop p99 ${loop(sample.bench.loop)} ms, GC ${fmt(sample.bench.gcMs, 0)} ms, heap ${fmt(sample.bench.heapMb, 0)} MB`,
    );
    // (A generator running late can still be sending in the first 'drain' window.)
    if (loadStopped !== undefined && ((drained() && lagResult !== undefined) || wallNow() > loadStopped.lastSent + DRAIN_TIMEOUT_MS)) break;
  }
  // Every 2xx applied, or the drain timeout passed: the ledger is read now.
  while (!drained() && loadStopped !== undefined && wallNow() < loadStopped.lastSent + DRAIN_TIMEOUT_MS)
    await new Promise((r) => setTimeout(r, 250));
  const lag = await lagWatch;
  sampler.stop();
  // POST -> applied record of every 2xx that has its record (those applied in the drain too).
  const latencies = function* () {
    for (let i = 0; i < requests.sent; i += 1)
      if (requests.accepted(i) && !Number.isNaN(applied!.received[i]!))
        yield { due: requests.due(i), latencyMs: applied!.received[i]! - requests.due(i) };
  };
  const soakStart = requests.started + WARMUP_MS;
  const e2eSoak = summarise([...latencies()].flatMap((r) => (r.due >= soakStart ? [r.latencyMs] : [])));
  const drift = latencyDrift({ samples: sampler.samples, sampleMs: SAMPLE_MS, judged: DRIFT === 'judge' });
  const rate = achievedRate({
    scheduled: requests.total,
    answers: (function* () {
      for (let i = 0; i < requests.total; i += 1) yield { status: requests.status[i]! };
    })(),
  });
  run = {
    command: `npm run bench:soak${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    started: runStarted,
    rate: RATE,
    defaultRate: DEFAULT_RATE,
    durationMs: DURATION_MS,
    warmupMs: WARMUP_MS,
    sampleMs: SAMPLE_MS,
    resources: RESOURCES,
    drainTimeoutMs: DRAIN_TIMEOUT_MS,
    lagPollMs: LAG_POLL_MS,
    logLevel,
    brokers,
    postgres: bridge.postgres,
    settings: bridge.settings,
    services: { ingress: ingress.args, worker: worker.args },
    probe: path.relative(repoRoot, probe),
    loadBefore,
    samples: sampler.samples,
    load: { started: load.started, ...loadStopped!, sent: load.counters.sent },
    lag,
    e2eSoak,
    drift,
    achieved: rate,
    rss: rssGrowth(sampler.samples),
    appliedWatch: { duplicates: applied.duplicates, foreign: applied.foreign },
    drained: drained(),
  };
} catch (error) {
  failure = error;
}

// The services' high-water marks before they stop.
const rssPeaks = rss.stop();
const rssHwmMb = { ingress: procStatusMb(ingress.pid, 'VmHWM'), worker: procStatusMb(worker.pid, 'VmHWM') };
otherRunsWindow.stop();
otherRunsWholeRun.stop();
let pgVersion = 'unknown';
let inboxStatuses: Record<string, number> = {};
try {
  const c = new pg.Client({ connectionString: bridge.databaseUrl });
  await c.connect();
  inboxStatuses = Object.fromEntries(
    (
      await c.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM inbox_events GROUP BY status ORDER BY status')
    ).rows.map((r) => [r.status, r.n]),
  );
  for (const r of (
    await c.query<{ event_id: string; status: string }>("SELECT event_id, status FROM inbox_events WHERE status <> 'applied'")
  ).rows)
    notApplied.set(r.event_id, r.status);
  pgVersion = (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
  await c.end();
} catch (error) {
  failure ??= error;
}
await applied?.stop().catch(() => {});
const exitCodes = await bridge.stop([readerGroup]);
if (failure !== undefined || run === undefined || applied === undefined) {
  console.error(failure);
  log(`service logs: ${ingress.logFile}, ${worker.logFile}`);
  process.exit(1);
}

const result: SoakRun = {
  ...run,
  pgVersion,
  inboxStatuses,
  ledger: ledger({
    sent: (function* () {
      for (let i = 0; i < requests.sent; i += 1) {
        const error = requests.errors.get(i);
        const why = notApplied.get(requests.eventIdOf(i));
        yield {
          status: requests.status[i]!,
          ...(error === undefined ? {} : { error }),
          applied: !Number.isNaN(applied.received[i]!),
          ...(why === undefined ? {} : { notApplied: why }),
        };
      }
    })(),
    duplicates: applied.duplicates,
    foreign: applied.foreign,
  }),
  exitCodes,
  rssPeakMb: { ingress: rssPeaks.ingress!.peakMb, worker: rssPeaks.worker!.peakMb },
  rssSoakPeakMb: { ingress: rssPeaks.ingress!.windows.soak ?? NaN, worker: rssPeaks.worker!.windows.soak ?? NaN },
  rssHwmMb,
  loadAfter: os.loadavg(),
  otherRuns: otherRunsWholeRun.seen(),
};
const report = renderReport(result, path.basename(CHART));
writeFileSync(OUT, report);
const soakSamples = result.samples.filter((x) => x.phase === 'soak');
writeBenchResult(
  {
    name: path.basename(OUT, '.md'),
    command: result.command,
    ranAt: result.started.toISOString(),
    machine: { ...machineNow(), loadAverage: { before: result.loadBefore[0]!, after: result.loadAfter[0]! } },
    versions: versionsNow({ kafka: KAFKA_VERSION, postgres: result.pgVersion }),
    settings: {
      rate: result.rate,
      durationMs: result.durationMs,
      warmupMs: result.warmupMs,
      sampleMs: result.sampleMs,
      resources: result.resources,
      logLevel: result.logLevel,
      services: result.services,
    },
    rounds: result.samples.map((x) => ({ ...x })),
    summary: [
      { label: 'POST → applied record p99, per sample window', unit: 'ms', values: soakSamples.map((x) => x.e2e.p99) },
      { label: 'ingress RSS, per sample window', unit: 'MB', values: soakSamples.map((x) => x.rssMb.ingress) },
      { label: 'worker RSS, per sample window', unit: 'MB', values: soakSamples.map((x) => x.rssMb.worker) },
      { label: 'worker group lag, per sample window', unit: 'records', values: soakSamples.map((x) => x.lag).filter(Number.isFinite) },
      {
        label: '2xx answers not applied (lost)',
        unit: 'events',
        values: [Object.values(result.ledger.missing).reduce((a, b) => a + b, 0)],
        target: '0',
      },
    ],
  },
  path.dirname(OUT),
);
const t = result.samples.map((s) => s.t);
writeFileSync(
  CHART,
  renderChart({
    title: `bench:soak, ${RATE} req/s for ${fmt(DURATION_MS / 60_000, 1)} min (${result.started.toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
    times: t,
    warmupEndS: WARMUP_MS / 1000,
    loadEndS: (result.load.lastSent - result.load.started) / 1000,
    panels: [
      {
        title: 'RSS per service',
        unit: 'MiB, VmRSS',
        series: [
          { label: 'ingress', color: '#1f77b4', values: result.samples.map((s) => s.rssMb.ingress) },
          { label: 'worker', color: '#d62728', values: result.samples.map((s) => s.rssMb.worker) },
        ],
      },
      {
        title: 'POST → applied record',
        unit: 'ms, per window',
        series: [
          { label: 'p99', color: '#9467bd', values: result.samples.map((s) => s.e2e.p99) },
          { label: 'p50', color: '#9467bd', values: result.samples.map((s) => s.e2e.p50), dashed: true },
        ],
      },
      {
        title: 'Worker group lag, events topic',
        unit: 'records',
        series: [{ label: 'lag', color: '#2ca02c', values: result.samples.map((s) => s.lag) }],
      },
      {
        title: 'Event-loop delay p99',
        unit: 'ms, per window',
        series: [
          { label: 'ingress', color: '#1f77b4', values: result.samples.map((s) => s.loop.ingress?.p99 ?? NaN) },
          { label: 'worker main thread', color: '#d62728', values: result.samples.map((s) => s.loop.worker?.p99 ?? NaN) },
          { label: 'bench (load + reader)', color: '#7f7f7f', values: result.samples.map((s) => s.bench.loop?.p99 ?? NaN), dashed: true },
        ],
      },
      {
        title: 'The bench process: GC pauses and heap',
        unit: 'ms per window; MiB',
        series: [
          { label: 'GC pauses, sum', color: '#8c564b', values: result.samples.map((s) => s.bench.gcMs) },
          { label: 'heap used (MiB)', color: '#7f7f7f', values: result.samples.map((s) => s.bench.heapMb), dashed: true },
        ],
      },
    ],
  }),
);
console.log(report);
log(
  `results: ${path.relative(process.cwd(), OUT)}, chart: ${path.relative(process.cwd(), CHART)}; service logs: ${ingress.logFile}, ${worker.logFile}`,
);
const failed = failures({ rss: result.rss, lag: result.lag, ledger: result.ledger, drift: result.drift, rate: result.achieved });
log(
  failed.length
    ? `FAIL: ${failed.join('; ')}`
    : `PASS: every criterion met${result.drift.judged ? '' : ` (the drift reported, not judged: ${fmt(result.drift.ratio, 2)}x)`}`,
);
process.exit(failed.length ? 1 : 0);
