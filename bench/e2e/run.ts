// npm run bench:e2e: the bridge end to end, as `npm start` runs it (the ingress and the worker as
// separate processes with their production Node flags, infra/dev/services.ts), against the local broker
// and Postgres, with a fresh database and fresh topics. Drives the ingress at fixed rates, open loop
// (bench/e2e/load.ts), reads the applied topic with its own read_committed consumer and reads the
// worker's commits (bench/e2e/observe.ts), and reports POST -> record on the applied topic per rate
// with a per-stage breakdown, the ledger (2xx answers = applied records) and each service's peak RSS.
// Right after each rate's bridge phase, the floor of the same path through Kafka alone at that rate
// (bench/e2e/floor.ts), and the ratio bridge p99 / floor p99.
// Writes bench/results/e2e.md and bench/results/e2e.json (which keeps the recent runs' ratios too).
//
//   npm run bench:e2e [-- --rates=100,500,1000 --duration-ms=12000 --warmup-ms=5000]
// Environment (the flags win): BENCH_RATES, BENCH_DURATION_MS, BENCH_WARMUP_MS, BENCH_WARMUP_RATE,
// BENCH_COMMIT_POLL_MS, BENCH_RSS_SAMPLE_MS, BENCH_DRAIN_TIMEOUT_MS, BENCH_RESOURCES, BENCH_LOG_LEVEL,
// BENCH_KEEP=1 (keep the database, topics and logs), BENCH_FLOOR=0 (no floor phases), BENCH_FLOOR_WARMUP_MS,
// BENCH_RUNS_KEPT (runs e2e.json keeps), KAFKA_BROKERS, DATABASE_URL (an admin URL).
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadDevEnv } from '../../infra/dev/bootstrap.ts';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { buildBundles } from '../../infra/build/build.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { brokerReady, parseBrokers } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { ancestorPids, startBridge, stopService, waitReady } from '../lib/bridge.ts';
import { brokerAge, cpuSince, cpuSnapshot, type CpuSnapshot } from '../lib/cpu.ts';
import { machineNow, RESULTS_DIR, versionsNow, writeBenchResult, type BenchResult, type BenchRun } from '../lib/results.ts';
import { keepRuns, ratio, spread } from '../lib/spread.ts';
import { cpuCalibrationMs, machineCpu, OtherRunsWatch } from '../lib/machine.ts';
import { procStatusMb, RssSampler } from '../lib/rss.ts';
import { fmt, summarise, type Summary } from '../lib/stats.ts';
import { BODY_BYTES, eventFactory, openLoop, wallNow, type PhaseResult } from './load.ts';
import { commitsFromWorkerLog, watchApplied, watchCommits, type AppliedWatch, type CommitWatch } from './observe.ts';
import { Floor, type FloorPhaseResult } from './floor.ts';

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
// The issue-12 targets.
const TARGETS = { p99At100: 50, p99At1000: 150, ingressRssMb: 150, workerRssMb: 250 };
// The issue-34 target: bridge p99 / floor p99 at 100 and 1,000 req/s.
const FLOOR_RATIO_TARGET = 2.0;

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

interface Phase {
  name: string;
  rate: number;
  load: PhaseResult;
  drainedMs: number;
  drainedAll: boolean;
  cpu: { ingress: number; worker: number; postgres: number; kafka: number; bench: number; machine: number; steal: number; seconds: number };
  otherRuns: string[];
  rssMb: { ingress: number; worker: number };
  benchLoopDelay: { p99: number; max: number };
}

const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();

async function runPhase(name: string, rate: number, durationMs: number): Promise<Phase> {
  log(`${name}: ${rate} req/s for ${durationMs / 1000} s`);
  const cpuBefore: CpuSnapshot = cpuSnapshot(ingress.pid);
  const workerBefore = cpuSnapshot(worker.pid).child;
  const benchBefore = process.cpuUsage();
  const machineBefore = machineCpu();
  otherRunsPhase.reset();
  const t0 = wallNow();
  rss.window(name);
  loopDelay.reset();
  const load = await openLoop({ port: ingressPort, path: '/webhooks/demo', rate, durationMs, phase: name, factory });
  const loopP99 = loopDelay.percentile(99) / 1e6;
  const loopMax = loopDelay.max / 1e6;
  // Drained: every 2xx of this phase is on the applied topic (or the timeout passed).
  const accepted = load.sent.filter((s) => s.status >= 200 && s.status < 300).map((s) => s.eventId);
  const drainStart = wallNow();
  let drainedAll = false;
  while (wallNow() - drainStart < DRAIN_TIMEOUT_MS) {
    if (accepted.every((id) => applied!.seen.has(id))) {
      drainedAll = true;
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const drainedMs = wallNow() - drainStart;
  rss.sample();
  rss.window(undefined);
  const cpu = cpuSince(cpuBefore, cpuSnapshot(ingress.pid));
  const own = process.cpuUsage(benchBefore);
  const machineAfter = machineCpu();
  const seconds = (wallNow() - t0) / 1000;
  const peaks = rss.peaks();
  const phase: Phase = {
    name,
    rate,
    load,
    drainedMs,
    drainedAll,
    cpu: {
      ingress: cpu.child,
      worker: cpuSnapshot(worker.pid).child - workerBefore,
      postgres: cpu.postgres,
      kafka: cpu.kafka,
      bench: (own.user + own.system) / 1e6,
      machine: machineAfter.busy - machineBefore.busy,
      steal: machineAfter.steal - machineBefore.steal,
      seconds,
    },
    otherRuns: otherRunsPhase.seen(),
    rssMb: { ingress: peaks.ingress!.windows[name] ?? NaN, worker: peaks.worker!.windows[name] ?? NaN },
    benchLoopDelay: { p99: loopP99, max: loopMax },
  };
  log(
    `${name}: ${accepted.length}/${load.sent.length} accepted, ${drainedAll ? 'all' : 'NOT all'} applied within ${fmt(drainedMs / 1000, 1)} s of the last answer`,
  );
  return phase;
}

interface Idle {
  seconds: number;
  ingress: number;
  worker: number;
  postgres: number;
  kafka: number;
  bench: number;
  machine: number;
  otherRuns: string[];
}

/** CPU over an idle window (no requests), in CPU seconds. */
async function measureIdle(): Promise<Idle> {
  const before = cpuSnapshot(ingress.pid);
  const workerBefore = cpuSnapshot(worker.pid).child;
  const benchBefore = process.cpuUsage();
  const machineBefore = machineCpu();
  otherRunsPhase.reset();
  const t0 = wallNow();
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const cpu = cpuSince(before, cpuSnapshot(ingress.pid));
  const own = process.cpuUsage(benchBefore);
  return {
    seconds: (wallNow() - t0) / 1000,
    ingress: cpu.child,
    worker: cpuSnapshot(worker.pid).child - workerBefore,
    postgres: cpu.postgres,
    kafka: cpu.kafka,
    bench: (own.user + own.system) / 1e6,
    machine: machineCpu().busy - machineBefore.busy,
    otherRuns: otherRunsPhase.seen(),
  };
}

interface FloorPhase {
  result: FloorPhaseResult;
  /** CPU over the phase, CPU seconds: the bench process (producer and reader), the relay process, the broker, the machine. */
  cpu: { bench: number; relay: number; machine: number; kafka: number; seconds: number };
  otherRuns: string[];
}

async function runFloorPhase(name: string, rate: number, durationMs: number): Promise<FloorPhase> {
  log(`${name}: ${rate} records/s for ${durationMs / 1000} s`);
  const before = cpuSnapshot(ingress.pid);
  const relayBefore = cpuSnapshot(floor!.relayPid).child;
  const benchBefore = process.cpuUsage();
  const machineBefore = machineCpu();
  otherRunsPhase.reset();
  const t0 = wallNow();
  const result = await floor!.phase(name, rate, durationMs);
  const own = process.cpuUsage(benchBefore);
  return {
    result,
    cpu: {
      bench: (own.user + own.system) / 1e6,
      relay: cpuSnapshot(floor!.relayPid).child - relayBefore,
      machine: machineCpu().busy - machineBefore.busy,
      kafka: cpuSince(before, cpuSnapshot(ingress.pid)).kafka,
      seconds: (wallNow() - t0) / 1000,
    },
    otherRuns: otherRunsPhase.seen(),
  };
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
  if (WARMUP_MS > 0) phases.push(await runPhase('warm-up', WARMUP_RATE, WARMUP_MS));
  // The floor's clients warm up too (not reported), so that neither side meets a cold JIT.
  if (floor && FLOOR_WARMUP_MS > 0) await runFloorPhase('floor warm-up', WARMUP_RATE, FLOOR_WARMUP_MS);
  if (IDLE_MS > 0) {
    log(`idle for ${IDLE_MS / 1000} s (CPU with no load)`);
    idle = await measureIdle();
  }
  // Each rate's floor right after its bridge phase, so both meet the machine of the same minutes.
  for (const rate of RATES) {
    await new Promise((r) => setTimeout(r, 1000));
    phases.push(await runPhase(`${rate} req/s`, rate, DURATION_MS));
    if (floor) {
      await new Promise((r) => setTimeout(r, 1000));
      floorPhases.push(await runFloorPhase(`floor ${rate} req/s`, rate, DURATION_MS));
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

// --- Figures -------------------------------------------------------------------------------------
interface Stages {
  total: Summary;
  ack: Summary;
  ackToCommit: Summary;
  ackToTxStart: Summary;
  txStartToCommit: Summary;
  commitToPublished: Summary;
  commitToSend: Summary;
  sendToReceived: Summary;
  /** ack -> relay send (the applied record's Kafka timestamp): the floor's middle hop, for comparison. */
  ackToSend: Summary;
}

interface Ledger {
  sent: number;
  accepted: number;
  other: Record<string, number>;
  applied: number;
  /** 2xx, no applied record, and no inbox row that explains it. */
  lost: number;
  /** 2xx, no applied record, and the worker's inbox says why (stale: a newer version applied first). */
  notApplied: Record<string, number>;
  /** Applied records of this phase's events that were not answered 2xx. */
  extra: number;
  commitsSeen: number;
}

function stagesOf(phase: Phase): { stages: Stages; ledger: Ledger } {
  const v = {
    total: [] as number[],
    ack: [] as number[],
    ackToCommit: [] as number[],
    ackToTxStart: [] as number[],
    txStartToCommit: [] as number[],
    commitToPublished: [] as number[],
    commitToSend: [] as number[],
    sendToReceived: [] as number[],
    ackToSend: [] as number[],
  };
  const ledger: Ledger = {
    sent: phase.load.sent.length,
    accepted: 0,
    other: {},
    applied: 0,
    lost: 0,
    notApplied: {},
    extra: 0,
    commitsSeen: 0,
  };
  for (const s of phase.load.sent) {
    const record = appliedWatch!.seen.get(s.eventId);
    const commit = commitWatch!.seen.get(s.eventId);
    if (commit) ledger.commitsSeen += 1;
    if (s.status < 200 || s.status >= 300) {
      const key = s.status === 0 ? `no answer (${s.error ?? 'unknown'})` : String(s.status);
      ledger.other[key] = (ledger.other[key] ?? 0) + 1;
      if (record) ledger.extra += 1;
      continue;
    }
    ledger.accepted += 1;
    if (!record) {
      const status = notApplied.get(s.eventId);
      if (status === undefined) ledger.lost += 1;
      else ledger.notApplied[status] = (ledger.notApplied[status] ?? 0) + 1;
      continue;
    }
    ledger.applied += 1;
    const ack = s.answered!;
    v.total.push(record.received - s.due);
    v.ack.push(ack - s.due);
    if (commit) {
      v.ackToCommit.push(commit.observed - ack);
      v.ackToTxStart.push(commit.transactionStart - ack);
      v.txStartToCommit.push(commit.observed - commit.transactionStart);
      v.commitToPublished.push(record.received - commit.observed);
      v.commitToSend.push(record.kafkaTimestamp - commit.observed);
    }
    v.sendToReceived.push(record.received - record.kafkaTimestamp);
    v.ackToSend.push(record.kafkaTimestamp - ack);
  }
  const stages = Object.fromEntries(Object.entries(v).map(([k, values]) => [k, summarise(values)])) as unknown as Stages;
  return { stages, ledger };
}

/** The floor's stages, the same points in time as the bridge's where they exist. */
interface FloorStages {
  /** due -> received by the read_committed consumer. */
  total: Summary;
  /** due -> the idempotent producer's send resolved (acks=all). */
  ack: Summary;
  /** ack -> the re-produced record's Kafka timestamp (fetched by the group member, transaction begun, sent). */
  ackToSend: Summary;
  /** re-produce send -> received (transaction commit, LSO, fetch). */
  sendToReceived: Summary;
}

interface FloorLedger {
  sent: number;
  acked: number;
  received: number;
  /** Acked, not read committed within the drain timeout. */
  lost: number;
  errors: number;
}

function floorStagesOf(phase: FloorPhase): { stages: FloorStages; ledger: FloorLedger } {
  const v = { total: [] as number[], ack: [] as number[], ackToSend: [] as number[], sendToReceived: [] as number[] };
  const ledger: FloorLedger = { sent: phase.result.sent.length, acked: 0, received: 0, lost: 0, errors: 0 };
  for (const x of phase.result.sent) {
    if (x.acked === undefined) {
      ledger.errors += 1;
      continue;
    }
    ledger.acked += 1;
    const record = phase.result.seen.get(x.id);
    if (!record) {
      ledger.lost += 1;
      continue;
    }
    ledger.received += 1;
    v.total.push(record.received - x.due);
    v.ack.push(x.acked - x.due);
    v.ackToSend.push(record.kafkaTimestamp - x.acked);
    v.sendToReceived.push(record.received - record.kafkaTimestamp);
  }
  const stages = Object.fromEntries(Object.entries(v).map(([k, values]) => [k, summarise(values)])) as unknown as FloorStages;
  return { stages, ledger };
}
const floorMeasured = floorPhases.map((p) => ({ phase: p, ...floorStagesOf(p) }));
const floorByRate = (rate: number) => floorMeasured.find((m) => m.phase.result.rate === rate);

const measured = phases.map((p) => ({ phase: p, ...stagesOf(p) }));
// BENCH_EVENTS_CSV=<file>: every answered event's points in time (wall ms), to look for what the
// percentiles hide (stalls that hit many events at once, a drift over a phase).
if (process.env.BENCH_EVENTS_CSV) {
  const rows = ['phase,event_id,status,due,ack,tx_start,commit_visible,relay_send,received,reused_socket,connected,written,error'];
  for (const p of phases)
    for (const s of p.load.sent) {
      const commit = commitWatch!.seen.get(s.eventId);
      const record = appliedWatch!.seen.get(s.eventId);
      rows.push(
        [
          JSON.stringify(p.name),
          s.eventId,
          s.status,
          s.due,
          s.answered ?? '',
          commit?.transactionStart ?? '',
          commit?.observed ?? '',
          record?.kafkaTimestamp ?? '',
          record?.received ?? '',
          s.reusedSocket ?? '',
          s.connected ?? '',
          s.written ?? '',
          s.error ?? '',
        ].join(','),
      );
    }
  writeFileSync(process.env.BENCH_EVENTS_CSV, `${rows.join('\n')}\n`);
  log(`per-event times: ${process.env.BENCH_EVENTS_CSV}`);
}
const byRate = (rate: number) => measured.find((m) => m.phase.name === `${rate} req/s`);
const totals = measured.reduce(
  (t, m) => ({
    accepted: t.accepted + m.ledger.accepted,
    applied: t.applied + m.ledger.applied,
    lost: t.lost + m.ledger.lost,
    notApplied: t.notApplied + Object.values(m.ledger.notApplied).reduce((a, b) => a + b, 0),
    extra: t.extra + m.ledger.extra,
    other: t.other + Object.values(m.ledger.other).reduce((a, b) => a + b, 0),
  }),
  { accepted: 0, applied: 0, lost: 0, notApplied: 0, extra: 0, other: 0 },
);
const ourIds = new Set(phases.flatMap((p) => p.load.sent.map((s) => s.eventId)));
const foreign = [...appliedWatch.seen.keys()].filter((id) => !ourIds.has(id)).length;
const peakIngress = rssPeaks.ingress!.peakMb;
const peakWorker = rssPeaks.worker!.peakMb;
const loadAfter = os.loadavg();
const calibrationAfter = cpuCalibrationMs();
const driftMs = clockCheckEnd.mono - clockCheckStart.mono - (clockCheckEnd.wall - clockCheckStart.wall);

const nodeModules = path.join(repoRoot, 'node_modules');
const versionOf = (pkg: string) =>
  (JSON.parse(readFileSync(path.join(nodeModules, pkg, 'package.json'), 'utf8')) as { version: string }).version;
const met = (ok: boolean) => (ok ? 'met' : '**NOT met**');
const ms = (n: number) => fmt(n, 1);
const row = (label: string, s: Summary) => `| ${label} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.max)} | ${s.count.toLocaleString('en')} |`;
const pct = (seconds: number, wall: number) => `${fmt((seconds / wall) * 100, 0)}%`;

function phaseSection(m: (typeof measured)[number]): string {
  const { phase, stages: s, ledger } = m;
  const achieved = phase.load.sent.length / ((phase.load.sent.at(-1)!.due - phase.load.started) / 1000 || 1);
  const others = Object.keys(ledger.other).length
    ? Object.entries(ledger.other)
        .map(([k, n]) => `${k}: ${n}`)
        .join(', ')
    : 'none';
  return `### ${phase.name}${phase.name === 'warm-up' ? ` (${phase.rate} req/s, not a measured rate)` : ''}

${ledger.sent.toLocaleString('en')} requests due over ${fmt(phase.load.sent.length / phase.rate, 1)} s (${fmt(achieved, 0)} req/s as scheduled; the generator sent them ${ms(phase.load.sendLagP99Ms)} ms late at p99, ${ms(phase.load.sendLagMaxMs)} ms at most).

| stage (ms) | p50 | p99 | max | events |
|---|---:|---:|---:|---:|
${row('**POST → record on the applied topic** (due time → received by the bench consumer)', s.total)}
${row('1. POST → broker ack (due time → HTTP 202 received)', s.ack)}
${row('2. ack → worker commit (202 → its transaction committed)', s.ackToCommit)}
${row('&nbsp;&nbsp;2a. ack → apply transaction start (applied_outbox.created_at = now())', s.ackToTxStart)}
${row('&nbsp;&nbsp;2b. apply transaction start → commit visible', s.txStartToCommit)}
${row('3. commit → published (commit visible → received by the read_committed consumer)', s.commitToPublished)}
${row('&nbsp;&nbsp;3a. commit visible → relay send (the record\u2019s Kafka timestamp, CreateTime)', s.commitToSend)}
${row('&nbsp;&nbsp;3b. relay send → received (transaction commit, LSO, fetch)', s.sendToReceived)}

Counts: ${ledger.sent.toLocaleString('en')} sent, **${ledger.accepted.toLocaleString('en')} 2xx**, non-2xx ${others}; **${ledger.applied.toLocaleString('en')} applied records** matched by event id, ${ledger.lost} lost (2xx, no applied record within ${DRAIN_TIMEOUT_MS / 1000} s and no inbox row saying why)${Object.keys(ledger.notApplied).length ? `, not applied by the worker: ${JSON.stringify(ledger.notApplied)}` : ''}, ${ledger.extra} applied without a 2xx; ${ledger.commitsSeen.toLocaleString('en')} commits seen. Every 2xx applied ${fmt(phase.drainedMs / 1000, 2)} s after the last answer: ${phase.drainedAll ? 'yes' : '**no**'}.
Peak RSS in this phase (sampled): ingress ${fmt(phase.rssMb.ingress, 1)} MB, worker ${fmt(phase.rssMb.worker, 1)} MB.
CPU over the phase (${fmt(phase.cpu.seconds, 1)} s, send window + drain; % of one core): ingress ${pct(phase.cpu.ingress, phase.cpu.seconds)}, worker ${pct(phase.cpu.worker, phase.cpu.seconds)}, Postgres ${pct(phase.cpu.postgres, phase.cpu.seconds)}, broker ${pct(phase.cpu.kafka, phase.cpu.seconds)}, bench process ${pct(phase.cpu.bench, phase.cpu.seconds)}; whole machine ${pct(phase.cpu.machine, phase.cpu.seconds)} of ${os.cpus().length * 100}%, of which **${pct(phase.cpu.machine - phase.cpu.ingress - phase.cpu.worker - phase.cpu.postgres - phase.cpu.kafka - phase.cpu.bench, phase.cpu.seconds)} by other processes**; steal ${pct(phase.cpu.steal, phase.cpu.seconds)}. Other test / benchmark runs seen during the phase: ${phase.otherRuns.length ? `**${phase.otherRuns.join(', ')}**` : 'none'}.
Bench event loop delay while sending: p99 ${ms(phase.benchLoopDelay.p99)} ms, max ${ms(phase.benchLoopDelay.max)} ms.
`;
}

const at100 = byRate(100);
const at1000 = byRate(1000);
const targetRows = [
  at100
    ? `| POST → applied record p99 at 100 req/s | **${ms(at100.stages.total.p99)} ms** (p50 ${ms(at100.stages.total.p50)}) | ≤ ${TARGETS.p99At100} ms | ${met(at100.stages.total.p99 <= TARGETS.p99At100)} |`
    : `| POST → applied record p99 at 100 req/s | not measured (100 not among the rates) | ≤ ${TARGETS.p99At100} ms | n/a |`,
  at1000
    ? `| POST → applied record p99 at 1,000 req/s | **${ms(at1000.stages.total.p99)} ms** (p50 ${ms(at1000.stages.total.p50)}) | ≤ ${TARGETS.p99At1000} ms | ${met(at1000.stages.total.p99 <= TARGETS.p99At1000)} |`
    : `| POST → applied record p99 at 1,000 req/s | not measured (1000 not among the rates) | ≤ ${TARGETS.p99At1000} ms | n/a |`,
  `| nothing lost: 2xx answers = applied records (all phases, warm-up included) | ${totals.accepted.toLocaleString('en')} = ${totals.applied.toLocaleString('en')}; ${totals.lost} lost, ${totals.notApplied} not applied by the worker (stale etc.), ${totals.extra} applied without a 2xx | equal | ${met(totals.lost === 0 && totals.notApplied === 0 && totals.extra === 0 && totals.accepted === totals.applied)} |`,
  `| ingress peak RSS | **${fmt(peakIngress, 1)} MB** (VmHWM ${fmt(hwm.ingress, 1)} MB) | ≤ ${TARGETS.ingressRssMb} MB | ${met(peakIngress <= TARGETS.ingressRssMb)} |`,
  `| worker peak RSS | **${fmt(peakWorker, 1)} MB** (VmHWM ${fmt(hwm.worker, 1)} MB) | ≤ ${TARGETS.workerRssMb} MB | ${met(peakWorker <= TARGETS.workerRssMb)} |`,
];
const measuredRates = measured.filter((m) => m.phase.name !== 'warm-up');

// --- The bridge against the floor, rate by rate, and over the runs e2e.json keeps ----------------
const comparisons = measuredRates.flatMap((m) => {
  const f = floorByRate(m.phase.rate);
  if (!f) return [];
  const b = m.stages;
  return [
    {
      rate: m.phase.rate,
      bridge: { p50: b.total.p50, p99: b.total.p99 },
      floor: { p50: f.stages.total.p50, p99: f.stages.total.p99 },
      ratioP99: ratio(b.total.p99, f.stages.total.p99),
      ratioP50: ratio(b.total.p50, f.stages.total.p50),
      // The same three points in time on both paths.
      stages: {
        ack: { bridge: b.ack, floor: f.stages.ack },
        ackToSend: { bridge: b.ackToSend, floor: f.stages.ackToSend },
        sendToReceived: { bridge: b.sendToReceived, floor: f.stages.sendToReceived },
      },
    },
  ];
});
const runFigureLabel = {
  bridgeP99: (rate: number) => `bridge p99 at ${rate.toLocaleString('en')} req/s (ms)`,
  floorP99: (rate: number) => `floor p99 at ${rate.toLocaleString('en')} req/s (ms)`,
  ratio: (rate: number) => `bridge p99 / floor p99 at ${rate.toLocaleString('en')} req/s`,
};
const thisRun: BenchRun = {
  ranAt: runStarted.toISOString(),
  loadAverage: { before: Number(loadBefore[0]!.toFixed(2)), after: Number(loadAfter[0]!.toFixed(2)) },
  calibrationMs: { before: calibrationBefore, after: calibrationAfter },
  otherRuns: otherRunsSeen,
  settings: { rates: measuredRates.map((m) => m.phase.rate), durationMs: DURATION_MS },
  figures: Object.fromEntries(
    comparisons.flatMap((c) => [
      [runFigureLabel.bridgeP99(c.rate), Number(c.bridge.p99.toFixed(2))],
      [runFigureLabel.floorP99(c.rate), Number(c.floor.p99.toFixed(2))],
      [runFigureLabel.ratio(c.rate), Number(c.ratioP99.toFixed(3))],
    ]),
  ),
};
/** The runs e2e.json already holds (each a complete run of this bench). */
function earlierRuns(): BenchRun[] {
  try {
    const earlier = JSON.parse(readFileSync(path.join(RESULTS_DIR, 'e2e.json'), 'utf8')) as BenchResult;
    return earlier.runs ?? [];
  } catch {
    return [];
  }
}
const runs = comparisons.length > 0 ? keepRuns(earlierRuns(), thisRun, RUNS_KEPT) : earlierRuns();
const overRuns = (label: string) => runs.map((r) => r.figures[label]).filter((v): v is number => v !== undefined);
const spreadText = (label: string, digits: number) => {
  const sp = spread(overRuns(label));
  return sp.count === 0 ? 'n/a' : `${fmt(sp.min, digits)} / ${fmt(sp.median, digits)} / ${fmt(sp.max, digits)} (${sp.count} runs)`;
};
const stageRow = (label: string, x: { bridge: Summary; floor: Summary }) =>
  `| ${label} | ${ms(x.bridge.p50)} / ${ms(x.bridge.p99)} | ${ms(x.floor.p50)} / ${ms(x.floor.p99)} | ${ms(x.bridge.p99 - x.floor.p99)} |`;
const floorSection = comparisons.length
  ? `## The bridge against the floor (issue 34)

The floor is the same path through Kafka alone (bench/e2e/floor.ts), run right after each rate's bridge phase on fresh
topics with the same partitions and settings: ${BODY_BYTES} B records, open loop at the same rate, produced by an idempotent
producer (acks=all; concurrent sends coalesced one batch at a time, as the ingress does), consumed by a consumer-group member in
its own process (the worker's consumer settings and Node flags) and re-produced there in one Kafka transaction per fetch (the
relay's transactional producer, createRelayProducer), read by a read_committed consumer as the applied records are. Every client
is shared/plumbing/kafka's. Latency: due time → received by the read_committed consumer.

| rate | bridge p50 / p99 | floor p50 / p99 | bridge p99 / floor p99 | target | bridge p50 / floor p50 |
|---|---|---|---:|---|---:|
${comparisons
  .map(
    (c) =>
      `| ${c.rate.toLocaleString('en')} req/s | ${ms(c.bridge.p50)} / ${ms(c.bridge.p99)} | ${ms(c.floor.p50)} / ${ms(c.floor.p99)} | **${fmt(c.ratioP99, 2)}** | ${c.rate === 100 || c.rate === 1000 ? `≤ ${FLOOR_RATIO_TARGET} (${met(c.ratioP99 <= FLOOR_RATIO_TARGET)})` : ''} | ${fmt(c.ratioP50, 2)} |`,
  )
  .join('\n')}

Stage by stage, the same points in time on both paths (ms, p50 / p99; the last column is what the bridge adds at p99):

${comparisons
  .map(
    (c) => `${c.rate.toLocaleString('en')} req/s:

| stage | bridge | floor | bridge p99 − floor p99 |
|---|---|---|---:|
${stageRow('1. due → ack (bridge: HTTP 202 after the broker ack; floor: the producer\u2019s send resolved)', c.stages.ack)}
${stageRow('2. ack → re-produce send (bridge: fetch, apply commit, relay pickup; floor: fetch, transaction begun)', c.stages.ackToSend)}
${stageRow('3. send → received (transaction commit, LSO, read_committed fetch)', c.stages.sendToReceived)}
`,
  )
  .join('\n')}
${floorMeasured
  .map(
    ({ phase, ledger }) =>
      `Floor ${phase.result.rate.toLocaleString('en')} req/s: ${ledger.sent.toLocaleString('en')} sent, ${ledger.acked.toLocaleString('en')} acked, ${ledger.received.toLocaleString('en')} read committed, ${ledger.lost} lost, ${ledger.errors} send errors, ${phase.result.duplicates} duplicates; drained ${fmt(phase.result.drainedMs / 1000, 2)} s after the last ack (${phase.result.drainedAll ? 'all' : '**not all**'}); generator ${ms(phase.result.sendLagP99Ms)} ms late at p99. CPU (% of one core over ${fmt(phase.cpu.seconds, 1)} s): bench process (producer, reader) ${pct(phase.cpu.bench, phase.cpu.seconds)}, relay process ${pct(phase.cpu.relay, phase.cpu.seconds)}, broker ${pct(phase.cpu.kafka, phase.cpu.seconds)}, whole machine ${pct(phase.cpu.machine, phase.cpu.seconds)}; other runs seen: ${phase.otherRuns.length ? `**${phase.otherRuns.join(', ')}**` : 'none'}.`,
  )
  .join('\n')}

Over the runs bench/results/e2e.json keeps (this one and up to ${RUNS_KEPT - 1} before it; min / median / max):

| rate | bridge p99 (ms) | floor p99 (ms) | bridge p99 / floor p99 |
|---|---|---|---|
${comparisons
  .map(
    (c) =>
      `| ${c.rate.toLocaleString('en')} req/s | ${spreadText(runFigureLabel.bridgeP99(c.rate), 1)} | ${spreadText(runFigureLabel.floorP99(c.rate), 1)} | ${spreadText(runFigureLabel.ratio(c.rate), 2)} |`,
  )
  .join('\n')}
`
  : '';

const report = `# End-to-end benchmark

Command: \`npm run bench:e2e\` (bench/e2e/run.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}). Run: ${runStarted.toISOString()}.

Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}.
Versions: Node ${process.version}, kafkajs ${versionOf('kafkajs')}, pg ${versionOf('pg')}, PostgreSQL ${pgVersion} (${postgres.origin}, ${postgres.adminUrl.replace(/\/\/([^:@/]*)(:[^@/]*)?@/, '//$1@')}),
Apache Kafka ${KAFKA_VERSION} (single local broker at ${brokers.join(',')}). Broker, Postgres, both services and the load generator share the machine.
CPU calibration (\`cpuCalibrationMs\`, bench/lib/machine.ts: a fixed piece of the bridge's own work on one core, lower is faster; first measured 2026-12-02): before ${calibrationBefore} ms, after ${calibrationAfter} ms.
${brokerAtStart ? `Broker age at the start (\`brokerAge\`, bench/lib/cpu.ts): up ${fmt(brokerAtStart.uptimeSeconds / 60, 1)} min, ${fmt(brokerAtStart.cpuSeconds, 0)} CPU seconds used${brokerAtStart.uptimeSeconds < 600 ? ' (**under 10 min: its JIT is still warming up, and the low-rate figures read high**)' : ''}.` : 'Broker age: no local broker process found.'}
Load average (1 / 5 / 15 min) before: ${loadBefore.map((l) => l.toFixed(2)).join(' / ')}; after: ${loadAfter.map((l) => l.toFixed(2)).join(' / ')}. Other test, typecheck, lint or benchmark
processes seen on the machine during the run (command lines sampled every second): ${otherRunsSeen.length ? `**${otherRunsSeen.join(', ')}**: the figures are not those of a quiet machine` : 'none'}; each phase below also gives the CPU share of processes other than the bench's.

Set-up: a fresh database (migrated with shared/domain/store/migrate.ts) and fresh topics (${settings.eventsPartitions} partitions, ${settings.retryLevels} retry levels,
topicSpecs), the ingress (\`node ${ingress.args.join(' ').replaceAll(repoRoot + '/', '')}\`) and one worker
(\`node ${worker.args.join(' ').replaceAll(repoRoot + '/', '')}\`, bundles built from ${serviceSpecs.ingress.main} and ${serviceSpecs.worker.main} by infra/build/build.ts; relay on the worker's event loop) as separate processes with npm start's
flags and environment (infra/dev/dev.env; LOG_LEVEL=${logLevel}, logs to a file), production defaults otherwise. Load: one Node process${generatorFlags ? ` (\`${generatorFlags}\`: its own compiler burst would otherwise take the cores the services share)` : ''}, open loop at a fixed rate
(each request due at start + i / rate and sent then, whatever is still in flight; latency counts from the due time), ${BODY_BYTES} B hmac-sha256-signed
theme.updated bodies, unique event ids, ${RESOURCES.toLocaleString('en')} resource ids in round robin, versions rising across the run (so every event applies);
${WARMUP_MS > 0 ? `a ${WARMUP_MS / 1000} s warm-up at ${WARMUP_RATE} req/s, then ` : ''}${measuredRates.map((m) => m.phase.rate.toLocaleString('en')).join(', ')} req/s for ${DURATION_MS / 1000} s each, each phase drained (every 2xx on the applied topic) before the next.

How each point in time is taken (one machine, one wall clock; this process's monotonic clock drifted ${fmt(driftMs, 2)} ms from the wall clock over the run):
- **due**: the scheduled send time of the request; **ack**: the 202's head received (the ingress answers after the broker's acks=all).
- **apply transaction start**: applied_outbox.created_at, which is \`now()\` of the worker's apply transaction, i.e. its start, not its commit
  (inbox_events.updated_at is the same \`now()\`; track_commit_timestamp is off, so Postgres keeps no commit time).
${
  COMMIT_POLL_MS > 0
    ? `- **commit visible**: the start of the first poll (every ${COMMIT_POLL_MS} ms, by this process, on its own connection) whose snapshot sees the event's
  applied_outbox row; it is at most a poll interval plus a round trip after the commit (slowest poll: ${ms(commitWatch.slowestPollMs)} ms, ${commitWatch.polls.toLocaleString('en')} polls).`
    : `- **commit visible**: the time of the worker's \`event processed\` log line for the event, written right after its transaction's COMMIT returned
  (pino's millisecond time; read from the worker's log after the run, so nothing polls Postgres during it; BENCH_COMMIT_POLL_MS=5 polls instead).`
}
- **relay send**: the applied record's Kafka timestamp (CreateTime, set by kafkajs when the relay calls send(), before its transaction commits).
- **published**: when the bench's own consumer (read_committed, fresh group, maxWaitTimeInMs 100) received the record: the consumer's receive
  time, not the Kafka timestamp. This is what a downstream subscriber sees.
Percentiles are per stage over the same events, so the stages' p99s do not add up to the total's.

## Results

| target (issue 12) | measured | target | |
|---|---|---|---|
${targetRows.join('\n')}

Summary per rate (POST → record on the applied topic, and the three stages, ms):

| rate | 2xx | applied | lost | non-2xx | total p50 / p99 / max | 1. POST → ack p50 / p99 | 2. ack → commit p50 / p99 | 3. commit → published p50 / p99 | peak RSS ingress / worker | CPU of other processes |
|---|---:|---:|---:|---:|---|---|---|---|---|---:|
${measured
  .map(
    ({ phase, stages: s, ledger }) =>
      `| ${phase.name === 'warm-up' ? `warm-up (${phase.rate} req/s)` : phase.name} | ${ledger.accepted.toLocaleString('en')} | ${ledger.applied.toLocaleString('en')} | ${ledger.lost}${Object.values(ledger.notApplied).reduce((a, b) => a + b, 0) ? ` (+${Object.values(ledger.notApplied).reduce((a, b) => a + b, 0)} not applied)` : ''} | ${Object.values(ledger.other).reduce((a, b) => a + b, 0)} | ${ms(s.total.p50)} / ${ms(s.total.p99)} / ${ms(s.total.max)} | ${ms(s.ack.p50)} / ${ms(s.ack.p99)} | ${ms(s.ackToCommit.p50)} / ${ms(s.ackToCommit.p99)} | ${ms(s.commitToPublished.p50)} / ${ms(s.commitToPublished.p99)} | ${fmt(phase.rssMb.ingress, 0)} / ${fmt(phase.rssMb.worker, 0)} MB | ${pct(phase.cpu.machine - phase.cpu.ingress - phase.cpu.worker - phase.cpu.postgres - phase.cpu.kafka - phase.cpu.bench, phase.cpu.seconds)} |`,
  )
  .join('\n')}

${
  idle
    ? `Idle, no requests, ${fmt(idle.seconds, 1)} s after the warm-up (% of one core): ingress ${pct(idle.ingress, idle.seconds)}, worker ${pct(idle.worker, idle.seconds)}, Postgres ${pct(idle.postgres, idle.seconds)}, broker ${pct(idle.kafka, idle.seconds)}, bench process ${pct(idle.bench, idle.seconds)} (its consumer); whole machine ${pct(idle.machine, idle.seconds)}; other test / benchmark runs: ${idle.otherRuns.length ? idle.otherRuns.join(', ') : 'none'}.
`
    : ''
}
${floorSection}
${measured.map(phaseSection).join('\n')}
Ledger over the whole run: ${totals.accepted.toLocaleString('en')} 2xx, ${totals.applied.toLocaleString('en')} applied records matched, ${totals.other} non-2xx, ${appliedWatch.duplicates} duplicate records on the applied topic,
${foreign} records of event ids this run did not send, ${appliedWatch.unlabelled} without an event-id header. Inbox outcomes in the worker's database: ${JSON.stringify(inboxStatuses)}.
Peak RSS over the run (VmRSS sampled every ${RSS_SAMPLE_MS} ms; VmHWM at the end): ingress ${fmt(peakIngress, 1)} MB (${fmt(hwm.ingress, 1)}), worker ${fmt(peakWorker, 1)} MB (${fmt(hwm.worker, 1)});
each service's node process only. Exit codes after SIGTERM: ingress ${exitCodes.ingress}, worker ${exitCodes.worker}.
`;

writeFileSync(path.join(repoRoot, 'bench', 'results', 'e2e.md'), report);
writeBenchResult({
  name: 'e2e',
  command: `npm run bench:e2e${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
  ranAt: runStarted.toISOString(),
  machine: { ...machineNow(), loadAverage: { before: loadBefore[0]!, after: loadAfter[0]! } },
  calibrationMs: { before: calibrationBefore, after: calibrationAfter },
  versions: versionsNow({ kafka: KAFKA_VERSION, postgres: pgVersion }),
  settings: {
    rates: measuredRates.map((m) => m.phase.rate),
    durationMs: DURATION_MS,
    warmupMs: WARMUP_MS,
    warmupRate: WARMUP_RATE,
    bodyBytes: BODY_BYTES,
    resources: RESOURCES,
    logLevel,
  },
  rounds: [
    ...measured.map(({ phase, stages, ledger }) => ({
      phase: phase.name,
      rate: phase.rate,
      accepted: ledger.accepted,
      applied: ledger.applied,
      lost: ledger.lost,
      nonTwoXx: Object.values(ledger.other).reduce((a, b) => a + b, 0),
      totalMs: stages.total,
      ackMs: stages.ack,
      ackToCommitMs: stages.ackToCommit,
      commitToPublishedMs: stages.commitToPublished,
      stagesMs: stages,
      peakRssMb: phase.rssMb,
      cpuSeconds: phase.cpu,
      otherRuns: phase.otherRuns,
    })),
    ...floorMeasured.map(({ phase, stages, ledger }) => ({
      phase: phase.result.name,
      rate: phase.result.rate,
      ...ledger,
      duplicates: phase.result.duplicates,
      drainedAll: phase.result.drainedAll,
      totalMs: stages.total,
      stagesMs: stages,
      cpuSeconds: phase.cpu,
      otherRuns: phase.otherRuns,
    })),
  ],
  runs,
  summary: [
    ...measuredRates.map((m) => ({
      label: `POST → applied record p99 at ${m.phase.rate.toLocaleString('en')} req/s`,
      unit: 'ms',
      values: [m.stages.total.p99],
      ...(m.phase.rate === 100
        ? { target: `≤ ${TARGETS.p99At100} ms` }
        : m.phase.rate === 1000
          ? { target: `≤ ${TARGETS.p99At1000} ms` }
          : {}),
    })),
    ...comparisons.map((c) => ({
      label: `floor p99 at ${c.rate.toLocaleString('en')} req/s`,
      unit: 'ms',
      values: [c.floor.p99],
    })),
    // Over every run the file keeps, so the docs show the spread rather than the latest run alone.
    ...comparisons.map((c) => ({
      label: `${runFigureLabel.ratio(c.rate)}, over the kept runs`,
      unit: '',
      values: overRuns(runFigureLabel.ratio(c.rate)),
      ...(c.rate === 100 || c.rate === 1000 ? { target: `≤ ${FLOOR_RATIO_TARGET}` } : {}),
    })),
    { label: '2xx answers not applied (lost)', unit: 'events', values: [totals.lost], target: '0' },
    { label: 'ingress peak RSS', unit: 'MB', values: [peakIngress], target: `≤ ${TARGETS.ingressRssMb} MB` },
    { label: 'worker peak RSS', unit: 'MB', values: [peakWorker], target: `≤ ${TARGETS.workerRssMb} MB` },
  ],
});
console.log(report);
log(`service logs: ${ingress.logFile}, ${worker.logFile}`);
process.exit(0);
