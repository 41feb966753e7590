// npm run bench:e2e: the bridge end to end, as `npm start` runs it (the ingress and the worker as
// separate processes with their production Node flags, infra/dev/services.ts), against the local broker
// and Postgres, with a fresh database and fresh topics. Drives the ingress at fixed rates, open loop
// (bench/e2e/load.ts), reads the applied topic with its own read_committed consumer and reads the
// worker's commits (bench/e2e/observe.ts), and reports POST -> record on the applied topic per rate
// with a per-stage breakdown, the ledger (2xx answers = applied records) and each service's peak RSS.
// Right after each rate's bridge phase, the floor of the same path through Kafka alone at that rate
// (bench/e2e/floor.ts), and the ratio bridge p99 / floor p99. The phases are bench/e2e/phases.ts, the
// figures made of them bench/e2e/figures.ts, the results files bench/e2e/report.ts.
// Writes bench/results/e2e.md and bench/results/e2e.json (which keeps the recent runs' ratios too).
//
//   npm run bench:e2e [-- --rates=100,500,1000 --duration-ms=12000 --warmup-ms=5000]
// Environment (the flags win): BENCH_RATES, BENCH_DURATION_MS, BENCH_WARMUP_MS, BENCH_WARMUP_RATE,
// BENCH_COMMIT_POLL_MS, BENCH_RSS_SAMPLE_MS, BENCH_DRAIN_TIMEOUT_MS, BENCH_RESOURCES, BENCH_LOG_LEVEL,
// BENCH_KEEP=1 (keep the database, topics and logs), BENCH_FLOOR=0 (no floor phases), BENCH_FLOOR_WARMUP_MS,
// BENCH_RUNS_KEPT (runs e2e.json keeps), BENCH_IDLE_MS (the idle window after the warm-up, 0: none),
// BENCH_SERVICE_NODE_ARGS (extra Node flags for both services), BENCH_EVENTS_CSV=<file> (every event's
// points in time), KAFKA_BROKERS, DATABASE_URL (an admin URL).
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadDevEnv } from '../../infra/dev/bootstrap.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { buildBundles } from '../../infra/build/build.ts';
import { repoRoot } from '../../infra/paths.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { brokerReady, parseBrokers } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { ancestorPids, startBridge, stopService, waitReady } from '../lib/bridge.ts';
import { brokerAge } from '../lib/cpu.ts';
import { cpuCalibrationMs, OtherRunsWatch } from '../lib/machine.ts';
import { RESULTS_DIR, writeBenchResult, type BenchResult, type BenchRun } from '../lib/results.ts';
import { procStatusMb, RssSampler } from '../lib/rss.ts';
import { keepRuns } from '../lib/spread.ts';
import { comparisons, eventsCsv, floorStagesOf, foreignRecords, stagesOf, totalsOf } from './figures.ts';
import { Floor } from './floor.ts';
import { eventFactory, wallNow } from './load.ts';
import { commitsFromWorkerLog, watchApplied, watchCommits, type AppliedWatch, type CommitWatch } from './observe.ts';
import { Phases, type FloorPhase, type Idle, type Phase } from './phases.ts';
import { e2eResult, renderReport, thisRun, type E2eFigures, type E2eRun } from './report.ts';

const { values: flags } = parseArgs({
  options: { rates: { type: 'string' }, 'duration-ms': { type: 'string' }, 'warmup-ms': { type: 'string' } },
  allowPositionals: false,
});
const RATES = (flags.rates ?? process.env.BENCH_RATES ?? '100,500,1000').split(',').map(Number);
const DURATION_MS = Number(flags['duration-ms'] ?? process.env.BENCH_DURATION_MS ?? 12_000);
// Long enough that a broker started shortly before has compiled its hot paths: a short warm-up left
// its JIT cold and the low-rate figures read high.
const WARMUP_MS = Number(flags['warmup-ms'] ?? process.env.BENCH_WARMUP_MS ?? 15_000);
const WARMUP_RATE = Number(process.env.BENCH_WARMUP_RATE ?? 200);
// 0 (default): commit times from the worker's log after the run (no load during it); > 0: poll every N ms.
const COMMIT_POLL_MS = Number(process.env.BENCH_COMMIT_POLL_MS ?? 0);
// Idle window after the warm-up: what the services, Postgres and the broker burn with no load.
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 5_000);
const RSS_SAMPLE_MS = Number(process.env.BENCH_RSS_SAMPLE_MS ?? 200);
const DRAIN_TIMEOUT_MS = Number(process.env.BENCH_DRAIN_TIMEOUT_MS ?? 30_000);
// More ids than a default run sends (about 20,000 events): no resource repeats, every 2xx must apply.
const RESOURCES = Number(process.env.BENCH_RESOURCES ?? 100_000);
const KEEP = process.env.BENCH_KEEP === '1';
const FLOOR = process.env.BENCH_FLOOR !== '0';
const FLOOR_WARMUP_MS = Number(process.env.BENCH_FLOOR_WARMUP_MS ?? 5_000);
const RUNS_KEPT = Number(process.env.BENCH_RUNS_KEPT ?? 10);
// Extra Node flags for both services, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" (not allowed in NODE_OPTIONS).
// The load generator's V8 flags (npm run bench:e2e sets --concurrent-turbofan-max-threads=1).
const generatorFlags = process.execArgv.filter((a) => /^--(concurrent-turbofan|max-semi|max-old)/.test(a)).join(' ');
const SERVICE_NODE_ARGS = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter((a) => a.length > 0);
if (RATES.some((r) => !Number.isFinite(r) || r <= 0) || !(DURATION_MS > 0) || !(WARMUP_MS >= 0)) {
  console.error('usage: npm run bench:e2e [-- --rates=100,500,1000 --duration-ms=12000 --warmup-ms=5000]');
  process.exit(2);
}
const log = (line: string) => console.error(`[bench:e2e] ${line}`);
loadDevEnv(); // as npm start: the dev sources and their secrets, LOG_LEVEL=info; variables already set win
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? DEFAULTS.dev.kafkaBrokers);
const secret = process.env.DEMO_SECRET!;
const logger = createLogger({ name: 'bench-e2e', level: 'warn' });

if (!(await brokerReady(brokers))) {
  console.error(`no Kafka broker answers at ${brokers.join(',')} (npm run kafka:start, or set KAFKA_BROKERS)`);
  process.exit(1);
}
// This process and its ancestors (tsx, sh, npm) are not "other runs".
const ourPids = ancestorPids();
const otherRunsWholeRun = new OtherRunsWatch(() => ourPids);
const otherRunsPhase = new OtherRunsWatch(() => ourPids);
const loadBefore = os.loadavg();
const calibrationBefore = cpuCalibrationMs();
const brokerAtStart = brokerAge();
const runStarted = new Date();
const clockCheckStart = { wall: Date.now(), mono: wallNow() };

// --- Fresh database and topics, and the services as npm start spawns them (bench/lib/bridge.ts) ---
const logLevel = process.env.BENCH_LOG_LEVEL ?? process.env.LOG_LEVEL ?? 'info';
const bridge = await startBridge({
  name: 'e2e',
  brokers,
  logger,
  log,
  logLevel,
  keep: KEEP,
  ...(SERVICE_NODE_ARGS.length > 0 ? { extraNodeArgs: SERVICE_NODE_ARGS } : {}),
});
const { stamp, postgres, databaseUrl, settings, kafka, ingress, worker, ingressPort } = bridge;
const services = [ingress, worker];
// The floor's middle hop runs as the worker does: its own process, from a bundle, with the worker's Node flags.
const floor = FLOOR
  ? new Floor({
      kafka,
      brokers,
      settings,
      stamp,
      relayCommand: [...serviceSpecs.worker.nodeArgs, ...(await buildBundles(['bench/e2e/floor-relay.ts']))],
      drainTimeoutMs: DRAIN_TIMEOUT_MS,
      log,
    })
  : undefined;
const rss = new RssSampler({ ingress: ingress.pid, worker: worker.pid }, RSS_SAMPLE_MS);
let applied: AppliedWatch | undefined;
let commits: CommitWatch | undefined;

async function cleanUp(): Promise<void> {
  rss.stop();
  await applied?.stop().catch(() => {});
  await commits?.stop().catch(() => {});
  await floor?.stop(KEEP).catch(() => {});
  await bridge.stop([`bench-e2e-reader-${stamp}`]);
}

const factory = eventFactory(secret, RESOURCES);
let idle: Idle | undefined;
const phases: Phase[] = [];
const floorPhases: FloorPhase[] = [];
let failure: unknown;
try {
  await Promise.all(services.map((s) => waitReady(s)));
  log(`ingress (pid ${ingress.pid}) and worker (pid ${worker.pid}) ready`);
  applied = await watchApplied(kafka, settings.applied, `bench-e2e-reader-${stamp}`);
  if (COMMIT_POLL_MS > 0) commits = await watchCommits(databaseUrl, COMMIT_POLL_MS);
  if (floor) await floor.start();
  const meter = new Phases({
    ingress,
    worker,
    ingressPort,
    factory,
    applied,
    floor,
    rss,
    otherRuns: otherRunsPhase,
    drainTimeoutMs: DRAIN_TIMEOUT_MS,
    idleMs: IDLE_MS,
    log,
  });
  if (WARMUP_MS > 0) phases.push(await meter.bridge('warm-up', WARMUP_RATE, WARMUP_MS));
  // The floor's clients warm up too (not reported), so that neither side meets a cold JIT.
  if (floor && FLOOR_WARMUP_MS > 0) await meter.floor('floor warm-up', WARMUP_RATE, FLOOR_WARMUP_MS);
  if (IDLE_MS > 0) {
    log(`idle for ${IDLE_MS / 1000} s (CPU with no load)`);
    idle = await meter.idle();
  }
  // Each rate's floor right after its bridge phase, so both meet the machine of the same minutes.
  for (const rate of RATES) {
    await new Promise((r) => setTimeout(r, 1000));
    phases.push(await meter.bridge(`${rate} req/s`, rate, DURATION_MS));
    if (floor) {
      await new Promise((r) => setTimeout(r, 1000));
      floorPhases.push(await meter.floor(`floor ${rate} req/s`, rate, DURATION_MS));
    }
  }
} catch (error) {
  failure = error;
}
// Peaks before the services stop; VmHWM is the kernel's own high-water mark of the same process.
const rssPeaks = rss.stop();
otherRunsPhase.stop();
otherRunsWholeRun.stop();
const otherRunsSeen = otherRunsWholeRun.seen();
const hwm = { ingress: procStatusMb(ingress.pid, 'VmHWM'), worker: procStatusMb(worker.pid, 'VmHWM') };
const clockCheckEnd = { wall: Date.now(), mono: wallNow() };
const exitCodes = { ingress: await stopService(ingress), worker: await stopService(worker) };
const appliedWatch = applied;
if (COMMIT_POLL_MS <= 0 && failure === undefined) commits = await commitsFromWorkerLog(worker.logFile, databaseUrl);
const commitWatch = commits;
let inboxStatuses: Record<string, number> = {};
/** Events the worker did not apply (stale, duplicate, quarantined, ...): their inbox status. */
const notApplied = new Map<string, string>();
let pgVersion = 'unknown';
{
  const c = new pg.Client({ connectionString: databaseUrl });
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
}
await cleanUp();
if (failure !== undefined || appliedWatch === undefined || commitWatch === undefined) {
  console.error(failure);
  console.error(`service logs: ${ingress.logFile}, ${worker.logFile}`);
  process.exit(1);
}

// --- Figures and the results files --------------------------------------------------------------
const observed = { applied: appliedWatch, commits: commitWatch, notApplied };
const floorMeasured = floorPhases.map((p) => floorStagesOf(p));
const measured = phases.map((p) => stagesOf(p, observed));
// BENCH_EVENTS_CSV=<file>: every answered event's points in time (wall ms), to look for what the
// percentiles hide (stalls that hit many events at once, a drift over a phase).
if (process.env.BENCH_EVENTS_CSV) {
  writeFileSync(process.env.BENCH_EVENTS_CSV, eventsCsv(phases, observed));
  log(`per-event times: ${process.env.BENCH_EVENTS_CSV}`);
}
const loadAfter = os.loadavg();
const calibrationAfter = cpuCalibrationMs();

const run: E2eRun = {
  args: process.argv.slice(2),
  started: runStarted,
  brokers,
  postgres,
  pgVersion,
  topics: settings,
  services: { ingress: ingress.args, worker: worker.args },
  logLevel,
  generatorFlags,
  resources: RESOURCES,
  durationMs: DURATION_MS,
  warmupMs: WARMUP_MS,
  warmupRate: WARMUP_RATE,
  commitPollMs: COMMIT_POLL_MS,
  drainTimeoutMs: DRAIN_TIMEOUT_MS,
  rssSampleMs: RSS_SAMPLE_MS,
  runsKept: RUNS_KEPT,
  calibrationMs: { before: calibrationBefore, after: calibrationAfter },
  brokerAtStart,
  loadBefore,
  loadAfter,
  otherRuns: otherRunsSeen,
  clockDriftMs: clockCheckEnd.mono - clockCheckStart.mono - (clockCheckEnd.wall - clockCheckStart.wall),
  idle,
  applied: appliedWatch,
  commits: commitWatch,
  inboxStatuses,
  rssPeakMb: { ingress: rssPeaks.ingress!.peakMb, worker: rssPeaks.worker!.peakMb },
  rssHwmMb: hwm,
  exitCodes,
};
const measuredRates = measured.filter((m) => m.phase.name !== 'warm-up');
const compared = comparisons(measuredRates, floorMeasured);
/** The runs e2e.json already holds (each a complete run of this bench). */
function earlierRuns(): BenchRun[] {
  try {
    const earlier = JSON.parse(readFileSync(path.join(RESULTS_DIR, 'e2e.json'), 'utf8')) as BenchResult;
    return earlier.runs ?? [];
  } catch {
    return [];
  }
}
const figures: E2eFigures = {
  measured,
  measuredRates,
  floorMeasured,
  comparisons: compared,
  totals: totalsOf(measured),
  foreign: foreignRecords(phases, appliedWatch),
  runs: compared.length > 0 ? keepRuns(earlierRuns(), thisRun(run, { measuredRates, comparisons: compared }), RUNS_KEPT) : earlierRuns(),
};
const report = renderReport(run, figures);
writeFileSync(path.join(repoRoot, 'bench', 'results', 'e2e.md'), report);
writeBenchResult(e2eResult(run, figures));
console.log(report);
log(`service logs: ${ingress.logFile}, ${worker.logFile}`);
process.exit(0);
