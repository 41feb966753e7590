// bench:e2e's results: bench/results/e2e.md for people and its JSON (bench/lib/results.ts), which
// keeps the recent runs' figures too, from what bench/e2e/run.ts collected and the figures
// bench/e2e/figures.ts made of it.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import type { ResolvedPostgres } from '../../infra/provision/postgres.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import type { TopicSettings } from '#plumbing/kafka/topics.ts';
import type { brokerAge } from '../lib/cpu.ts';
import { machineNow, versionsNow, type BenchResult, type BenchRun } from '../lib/results.ts';
import { spread } from '../lib/spread.ts';
import { fmt, type Summary } from '../lib/stats.ts';
import {
  FLOOR_RATIO_TARGET,
  runFigureLabel,
  runFigures,
  TARGETS,
  worstAckWindow,
  type AckWindow,
  type Comparison,
  type Measured,
  type MeasuredFloor,
  type Totals,
} from './figures.ts';
import { BODY_BYTES } from './load.ts';
import type { AppliedWatch, CommitWatch } from './observe.ts';
import type { Idle } from './phases.ts';

/** What a run of bench:e2e collected, besides its phases. */
export interface E2eRun {
  /** The command's arguments after the script. */
  args: string[];
  started: Date;
  brokers: string[];
  postgres: ResolvedPostgres;
  pgVersion: string;
  topics: TopicSettings;
  /** Each service's node command line after `node`. */
  services: { ingress: string[]; worker: string[] };
  logLevel: string;
  /** The load generator's own V8 flags. */
  generatorFlags: string;
  resources: number;
  durationMs: number;
  warmupMs: number;
  warmupRate: number;
  commitPollMs: number;
  drainTimeoutMs: number;
  rssSampleMs: number;
  runsKept: number;
  calibrationMs: { before: number; after: number };
  brokerAtStart: ReturnType<typeof brokerAge>;
  loadBefore: number[];
  loadAfter: number[];
  /** Other test or benchmark runs seen over the whole run. */
  otherRuns: string[];
  /** How far this process's monotonic clock drifted from the wall clock over the run, ms. */
  clockDriftMs: number;
  idle: Idle | undefined;
  applied: AppliedWatch;
  commits: CommitWatch;
  inboxStatuses: Record<string, number>;
  rssPeakMb: { ingress: number; worker: number };
  rssHwmMb: { ingress: number; worker: number };
  exitCodes: { ingress: number | null; worker: number | null };
}

/** The figures of the run, and the runs e2e.json keeps (this one last). */
export interface E2eFigures {
  measured: Measured[];
  /** The measured phases without the warm-up. */
  measuredRates: Measured[];
  floorMeasured: MeasuredFloor[];
  comparisons: Comparison[];
  totals: Totals;
  /** Applied records of event ids this run did not send. */
  foreign: number;
  runs: BenchRun[];
}

/** The figures this run keeps in e2e.json's runs. */
export function thisRun(run: E2eRun, figures: Pick<E2eFigures, 'measuredRates' | 'comparisons'>): BenchRun {
  return {
    ranAt: run.started.toISOString(),
    loadAverage: { before: Number(run.loadBefore[0]!.toFixed(2)), after: Number(run.loadAfter[0]!.toFixed(2)) },
    calibrationMs: run.calibrationMs,
    otherRuns: run.otherRuns,
    settings: { rates: figures.measuredRates.map((m) => m.phase.rate), durationMs: run.durationMs },
    figures: runFigures(figures.comparisons),
  };
}

const versionOf = (pkg: string) =>
  (JSON.parse(readFileSync(path.join(repoRoot, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
const met = (ok: boolean) => (ok ? 'met' : '**NOT met**');
const ms = (n: number) => fmt(n, 1);
const row = (label: string, s: Summary) => `| ${label} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.max)} | ${s.count.toLocaleString('en')} |`;
const pct = (seconds: number, wall: number) => `${fmt((seconds / wall) * 100, 0)}%`;

function phaseSection(m: Measured, drainTimeoutMs: number): string {
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

Counts: ${ledger.sent.toLocaleString('en')} sent, **${ledger.accepted.toLocaleString('en')} 2xx**, non-2xx ${others}; **${ledger.applied.toLocaleString('en')} applied records** matched by event id, ${ledger.lost} lost (2xx, no applied record within ${drainTimeoutMs / 1000} s and no inbox row saying why)${Object.keys(ledger.notApplied).length ? `, not applied by the worker: ${JSON.stringify(ledger.notApplied)}` : ''}, ${ledger.extra} applied without a 2xx; ${ledger.commitsSeen.toLocaleString('en')} commits seen. Every 2xx applied ${fmt(phase.drainedMs / 1000, 2)} s after the last answer: ${phase.drainedAll ? 'yes' : '**no**'}.
Peak RSS in this phase (sampled): ingress ${fmt(phase.rssMb.ingress, 1)} MB, worker ${fmt(phase.rssMb.worker, 1)} MB.
CPU over the phase (${fmt(phase.cpu.seconds, 1)} s, send window + drain; % of one core): ingress ${pct(phase.cpu.ingress, phase.cpu.seconds)}, worker ${pct(phase.cpu.worker, phase.cpu.seconds)}, Postgres ${pct(phase.cpu.postgres, phase.cpu.seconds)}, broker ${pct(phase.cpu.kafka, phase.cpu.seconds)}, bench process ${pct(phase.cpu.bench, phase.cpu.seconds)}; whole machine ${pct(phase.cpu.machine, phase.cpu.seconds)} of ${os.cpus().length * 100}%, of which **${pct(phase.cpu.machine - phase.cpu.ingress - phase.cpu.worker - phase.cpu.postgres - phase.cpu.kafka - phase.cpu.bench, phase.cpu.seconds)} by other processes**; steal ${pct(phase.cpu.steal, phase.cpu.seconds)}. Other test / benchmark runs seen during the phase: ${phase.otherRuns.length ? `**${phase.otherRuns.join(', ')}**` : 'none'}.
Bench event loop delay while sending: p99 ${ms(phase.benchLoopDelay.p99)} ms, max ${ms(phase.benchLoopDelay.max)} ms.
${ackWindowLine(worstAckWindow(phase))}
`;
}

function ackWindowLine(w: AckWindow | undefined): string {
  if (w === undefined) return 'Slowest 100 ms of POST → ack: no answers.';
  const errors = Object.entries(w.errors).map(([code, n]) => `${code} ${n}`);
  return (
    `Slowest 100 ms of POST → ack (by due time): ${fmt(w.startS, 1)} s into the phase, the slowest answer ${ms(w.maxAckMs)} ms after its due time; ` +
    `${w.requests} requests, ${w.newConnections} on new connections, written at most ${ms(w.writtenLateMaxMs)} ms after due; ` +
    `transport errors: ${errors.length ? errors.join(', ') : 'none'}.`
  );
}

/** bench/results/e2e.md. */
export function renderReport(run: E2eRun, figures: E2eFigures): string {
  const { measured, measuredRates, floorMeasured, comparisons, totals, foreign, runs } = figures;
  const { idle, brokers, postgres, pgVersion, brokerAtStart, loadBefore, loadAfter, logLevel, generatorFlags } = run;
  const { applied: appliedWatch, commits: commitWatch, inboxStatuses, exitCodes, rssHwmMb: hwm } = run;
  const { ingress: peakIngress, worker: peakWorker } = run.rssPeakMb;
  const { before: calibrationBefore, after: calibrationAfter } = run.calibrationMs;
  const byRate = (rate: number) => measured.find((m) => m.phase.name === `${rate} req/s`);
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
  const overRuns = (label: string) => runs.map((r) => r.figures[label]).filter((v): v is number => v !== undefined);
  const spreadText = (label: string, digits: number) => {
    const sp = spread(overRuns(label));
    return sp.count === 0 ? 'n/a' : `${fmt(sp.min, digits)} / ${fmt(sp.median, digits)} / ${fmt(sp.max, digits)} (${sp.count} runs)`;
  };
  const stageRow = (label: string, x: { bridge: Summary; floor: Summary }) =>
    `| ${label} | ${ms(x.bridge.p50)} / ${ms(x.bridge.p99)} | ${ms(x.floor.p50)} / ${ms(x.floor.p99)} | ${ms(x.bridge.p99 - x.floor.p99)} |`;
  const floorSection = comparisons.length
    ? `## The bridge against the floor

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

Over the runs bench/results/e2e.json keeps (this one and up to ${run.runsKept - 1} before it; min / median / max):

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

  return `# End-to-end benchmark

Command: \`npm run bench:e2e\` (bench/e2e/run.ts${run.args.length > 0 ? ` ${run.args.join(' ')}` : ''}). Run: ${run.started.toISOString()}.

Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}.
Versions: Node ${process.version}, kafkajs ${versionOf('kafkajs')}, pg ${versionOf('pg')}, PostgreSQL ${pgVersion} (${postgres.origin}, ${postgres.adminUrl.replace(/\/\/([^:@/]*)(:[^@/]*)?@/, '//$1@')}),
Apache Kafka ${KAFKA_VERSION} (single local broker at ${brokers.join(',')}). Broker, Postgres, both services and the load generator share the machine.
CPU calibration (\`cpuCalibrationMs\`, bench/lib/machine.ts: a fixed piece of the bridge's own work on one core, lower is faster; first measured 2026-12-02): before ${calibrationBefore} ms, after ${calibrationAfter} ms.
${brokerAtStart ? `Broker age at the start (\`brokerAge\`, bench/lib/cpu.ts): up ${fmt(brokerAtStart.uptimeSeconds / 60, 1)} min, ${fmt(brokerAtStart.cpuSeconds, 0)} CPU seconds used${brokerAtStart.uptimeSeconds < 600 ? ' (**under 10 min: its JIT is still warming up, and the low-rate figures read high**)' : ''}.` : 'Broker age: no local broker process found.'}
Load average (1 / 5 / 15 min) before: ${loadBefore.map((l) => l.toFixed(2)).join(' / ')}; after: ${loadAfter.map((l) => l.toFixed(2)).join(' / ')}. Other test, typecheck, lint or benchmark
processes seen on the machine during the run (command lines sampled every second): ${run.otherRuns.length ? `**${run.otherRuns.join(', ')}**: the figures are not those of a quiet machine` : 'none'}; each phase below also gives the CPU share of processes other than the bench's.

Set-up: a fresh database (migrated with shared/domain/store/migrate.ts) and fresh topics (${run.topics.eventsPartitions} partitions, ${run.topics.retryLevels} retry levels,
topicSpecs), the ingress (\`node ${run.services.ingress.join(' ').replaceAll(repoRoot + '/', '')}\`) and one worker
(\`node ${run.services.worker.join(' ').replaceAll(repoRoot + '/', '')}\`, bundles built from ${serviceSpecs.ingress.main} and ${serviceSpecs.worker.main} by infra/build/build.ts; relay on the worker's event loop; the worker at npm start's niceness, WORKER_NICENESS) as separate processes with npm start's
flags, priorities and environment (infra/dev/dev.env; LOG_LEVEL=${logLevel}, logs to a file), production defaults otherwise. Load: one Node process${generatorFlags ? ` (\`${generatorFlags}\`: its own compiler burst would otherwise take the cores the services share)` : ''}, open loop at a fixed rate
(each request due at start + i / rate and sent then, whatever is still in flight; latency counts from the due time), ${BODY_BYTES} B hmac-sha256-signed
theme.updated bodies, unique event ids, ${run.resources.toLocaleString('en')} resource ids in round robin, versions rising across the run (so every event applies);
${run.warmupMs > 0 ? `a ${run.warmupMs / 1000} s warm-up at ${run.warmupRate} req/s, then ` : ''}${measuredRates.map((m) => m.phase.rate.toLocaleString('en')).join(', ')} req/s for ${run.durationMs / 1000} s each, each phase drained (every 2xx on the applied topic) before the next.

How each point in time is taken (one machine, one wall clock; this process's monotonic clock drifted ${fmt(run.clockDriftMs, 2)} ms from the wall clock over the run):
- **due**: the scheduled send time of the request; **ack**: the 202's head received (the ingress answers after the broker's acks=all).
- **apply transaction start**: applied_outbox.created_at, which is \`now()\` of the worker's apply transaction, i.e. its start, not its commit
  (inbox_events.updated_at is the same \`now()\`; track_commit_timestamp is off, so Postgres keeps no commit time).
${
  run.commitPollMs > 0
    ? `- **commit visible**: the start of the first poll (every ${run.commitPollMs} ms, by this process, on its own connection) whose snapshot sees the event's
  applied_outbox row; it is at most a poll interval plus a round trip after the commit (slowest poll: ${ms(commitWatch.slowestPollMs)} ms, ${commitWatch.polls.toLocaleString('en')} polls).`
    : `- **commit visible**: the time of the worker's \`event processed\` log line for the event, written right after its transaction's COMMIT returned
  (pino's millisecond time; read from the worker's log after the run, so nothing polls Postgres during it; BENCH_COMMIT_POLL_MS=5 polls instead).`
}
- **relay send**: the applied record's Kafka timestamp (CreateTime, set by kafkajs when the relay calls send(), before its transaction commits).
- **published**: when the bench's own consumer (read_committed, fresh group, maxWaitTimeInMs 100) received the record: the consumer's receive
  time, not the Kafka timestamp. This is what a downstream subscriber sees.
Percentiles are per stage over the same events, so the stages' p99s do not add up to the total's.

## Results

| the bridge's targets | measured | target | |
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
${measured.map((m) => phaseSection(m, run.drainTimeoutMs)).join('\n')}
Ledger over the whole run: ${totals.accepted.toLocaleString('en')} 2xx, ${totals.applied.toLocaleString('en')} applied records matched, ${totals.other} non-2xx, ${appliedWatch.duplicates} duplicate records on the applied topic,
${foreign} records of event ids this run did not send, ${appliedWatch.unlabelled} without an event-id header. Inbox outcomes in the worker's database: ${JSON.stringify(inboxStatuses)}.
Peak RSS over the run (VmRSS sampled every ${run.rssSampleMs} ms; VmHWM at the end): ingress ${fmt(peakIngress, 1)} MB (${fmt(hwm.ingress, 1)}), worker ${fmt(peakWorker, 1)} MB (${fmt(hwm.worker, 1)});
each service's node process only. Exit codes after SIGTERM: ingress ${exitCodes.ingress}, worker ${exitCodes.worker}.
`;
}

/** bench/results/e2e.json. */
export function e2eResult(run: E2eRun, figures: E2eFigures): BenchResult {
  const { measured, measuredRates, floorMeasured, comparisons, totals, runs } = figures;
  const { loadBefore, loadAfter, pgVersion, logLevel } = run;
  const { before: calibrationBefore, after: calibrationAfter } = run.calibrationMs;
  const { ingress: peakIngress, worker: peakWorker } = run.rssPeakMb;
  const overRuns = (label: string) => runs.map((r) => r.figures[label]).filter((v): v is number => v !== undefined);
  return {
    name: 'e2e',
    command: `npm run bench:e2e${run.args.length > 0 ? ` -- ${run.args.join(' ')}` : ''}`,
    ranAt: run.started.toISOString(),
    machine: { ...machineNow(), loadAverage: { before: loadBefore[0]!, after: loadAfter[0]! } },
    calibrationMs: { before: calibrationBefore, after: calibrationAfter },
    versions: versionsNow({ kafka: KAFKA_VERSION, postgres: pgVersion }),
    settings: {
      rates: measuredRates.map((m) => m.phase.rate),
      durationMs: run.durationMs,
      warmupMs: run.warmupMs,
      warmupRate: run.warmupRate,
      bodyBytes: BODY_BYTES,
      resources: run.resources,
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
  };
}
