// bench:worker's results: bench/results/worker.md for people, from the rounds bench/worker/run.ts
// measured, and its JSON (bench/lib/results.ts), which docs/benchmarks.md quotes.
import os from 'node:os';
import type { CpuSnapshot } from '../lib/cpu.ts';
import { machineNow, versionsNow, type BenchResult } from '../lib/results.ts';
import type { CopyPlan } from './copy-plan.ts';
import { copyCeilingReport } from './copy-report.ts';
import type { CopyCeilingRound } from './copy-write.ts';
import type { Dataset } from './dataset.ts';
import type { CeilingRound, WorkerRound } from './rounds.ts';

export interface WorkerBenchRun {
  /** ISO time the run started. */
  ranAt: string;
  brokers: string[];
  /** Where Postgres came from (infra/provision/postgres.ts). */
  postgresOrigin: string;
  pgVersion: string;
  kafkaVersion: string;
  /** package.json's dependencies, for the client versions. */
  dependencies: Record<string, string>;
  /** os.loadavg() before the run. */
  loadBefore: number[];
  calibrationMs: { before: number; after: number };
  resources: number;
  dataset: Dataset;
  partitions: number;
  batchSize: number;
  concurrency: number;
  maxBytesPerPartition: number;
  /** The worker child's Node flags. */
  nodeArgs: string[];
  /** The worker child's niceness (npm start's, WORKER_NICENESS); absent in runs from before it was set. */
  niceness?: number;
  /** BENCH_ROUNDS. */
  roundsWanted: number;
  /** split: the same worker with WORKER_ROLE=apply and the relay in a WORKER_ROLE=relay process (absent in older runs). */
  rounds: Array<{ worker: WorkerRound; split?: WorkerRound; ceiling: CeilingRound }>;
  copyRounds: CopyCeilingRound[];
  copyPlan: CopyPlan;
}

const median = <T>(items: T[], by: (item: T) => number): T => [...items].sort((x, y) => by(x) - by(y))[Math.floor((items.length - 1) / 2)]!;

/** The median round of the worker and of the same-SQL ceiling, the median of the rounds' ratios, the highest peak RSS. */
function medians(run: WorkerBenchRun) {
  const { rounds } = run;
  const workerRun = median(
    rounds.map((r) => r.worker),
    (w) => w.rate,
  );
  const ceilingRun = median(
    rounds.map((r) => r.ceiling),
    (c) => c.rate,
  );
  const ratio = median(
    rounds.map((r) => r.worker.rate / r.ceiling.rate),
    (x) => x,
  );
  const peakRss = Math.max(...rounds.map((r) => r.worker.peakRssMb));
  return { workerRun, ceilingRun, ratio, peakRss };
}

function cpuTable(events: number, workerRun: WorkerRound, splitRun: WorkerRound | undefined, ceilingRun: CeilingRound): string {
  const us = (seconds: number) => Math.round((seconds / events) * 1e6).toLocaleString('en');
  const row = (name: string, c: CpuSnapshot | undefined, ms: number) =>
    c === undefined
      ? `| ${name} | n/a | n/a | n/a | n/a | n/a |`
      : `| ${name} | ${us(c.child)} | ${us(c.postgres)} | ${us(c.kafka)} | ${us(c.child + c.postgres + c.kafka)} | ${(((c.child + c.postgres + c.kafka) / (ms / 1000)) * 100).toFixed(0)}% |`;
  return [
    '| run | node process | Postgres (all backends) | Kafka broker | total | cores busy (of 200%) |',
    '|---|---|---|---|---|---|',
    row('worker (first fetch -> applied topic fully published)', workerRun.cpuToPublished, workerRun.drainedMs),
    row("worker (first fetch -> last commit; part of the relay's work still to come)", workerRun.cpu, workerRun.consumedMs),
    ...(splitRun
      ? [
          row(
            'worker (WORKER_ROLE=apply) + relay process (first fetch -> applied topic fully published)',
            splitRun.cpuToPublished,
            splitRun.drainedMs,
          ),
        ]
      : []),
    row('ceiling (bench process applies directly)', ceilingRun.cpu, ceilingRun.ms),
  ].join('\n');
}

/** bench/results/worker.md: the set-up, every round, the median round of each run, CPU per event, the COPY ceiling. */
export function renderReport(run: WorkerBenchRun): string {
  const events = run.dataset.events.length;
  const { workerRun, ceilingRun, ratio, peakRss } = medians(run);
  const splits = run.rounds.flatMap((r) => (r.split ? [r.split] : []));
  const published = (w: WorkerRound) => events / (w.drainedMs / 1000);
  const splitRun = splits.length === 0 ? undefined : median(splits, published);
  const fmt = (n: number) => Math.round(n).toLocaleString('en');
  const workerRate = workerRun.rate;
  const ceilingRate = ceilingRun.rate;
  const ceilingMs = ceilingRun.ms;
  const workerCounts = workerRun.counts;
  const ceilingCounts = ceilingRun.counts;
  return `# Worker benchmark

Command: \`npm run bench:worker\` (bench/worker/run.ts). Run: ${new Date().toISOString()}.

Machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}.
Versions: Node ${process.version}, kafkajs ${run.dependencies['kafkajs']}, pg ${run.dependencies['pg']}, PostgreSQL ${run.pgVersion} (${run.postgresOrigin}),
Apache Kafka ${run.kafkaVersion} (single local broker, ${run.brokers.join(',')}). Broker, Postgres and the worker share the machine.
CPU calibration (\`cpuCalibrationMs\`, bench/lib/machine.ts: a fixed piece of the bridge's own work on one core, lower is faster; first measured 2026-12-02): before ${run.calibrationMs.before} ms, after ${run.calibrationMs.after} ms.
Load average (1 min) before the run: ${run.loadBefore[0]!.toFixed(1)}, after: ${os.loadavg()[0]!.toFixed(1)} (other processes were running on the machine when this is well above 0).

Workload: ${events.toLocaleString('en')} events over ${run.resources.toLocaleString('en')} resources (${run.dataset.duplicates.toLocaleString('en')} exact redeliveries = 10%,
${run.dataset.stale.toLocaleString('en')} stale versions = 10%), ~${run.dataset.events[0]!.value.length} bytes each, preloaded to a fresh ${run.partitions}-partition topic.
Worker settings: WORKER_BATCH_SIZE=${run.batchSize}, WORKER_PARTITIONS_CONCURRENCY=${run.concurrency}, WORKER_MAX_BYTES_PER_PARTITION=${run.maxBytesPerPartition},
node ${run.nodeArgs.join(' ')}${run.niceness === undefined ? '' : ` at niceness ${run.niceness} (npm start's, WORKER_NICENESS)`}, one worker process, per-event pino logs at info
(serialised, written to /dev/null), outbox relay on the worker's event loop (WORKER_ROLE=all, as npm start runs it). Each round
also runs the other topology: the same worker child with WORKER_ROLE=apply beside the worker's own bundle with WORKER_ROLE=relay,
at the same flags and niceness; its node figures are the two processes' CPU together.

${run.roundsWanted} rounds, each a worker run (fresh consumer group from the beginning of the topic, fresh database) then a
ceiling run (fresh database):

| round | worker events/s | ceiling events/s | worker / ceiling | worker peak RSS | fully published events/s, relay inline | fully published events/s, relay process | relay process / inline | peak RSS, apply worker + relay process |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
${run.rounds.map((r, i) => `| ${i + 1} | ${fmt(r.worker.rate)} | ${fmt(r.ceiling.rate)} | ${((r.worker.rate / r.ceiling.rate) * 100).toFixed(0)}% | ${r.worker.peakRssMb.toFixed(0)} MB | ${fmt(published(r.worker))} | ${r.split ? fmt(published(r.split)) : 'n/a'} | ${r.split ? (published(r.split) / published(r.worker)).toFixed(2) : 'n/a'} | ${r.split ? `${r.split.peakRssMb.toFixed(0)} + ${r.split.relayProcess?.peakRssMb.toFixed(0) ?? '?'} MB` : 'n/a'} |`).join('\n')}

The median round of each:

| run | time | events/s | notes |
|---|---|---|---|
| worker: first fetched batch -> last offset commit | ${(workerRun.consumedMs / 1000).toFixed(2)} s | **${Math.round(workerRate).toLocaleString('en')}** | peak RSS ${workerRun.peakRssMb.toFixed(0)} MB (${workerRun.rssAtCommitMb.toFixed(0)} MB at the last commit) |
| worker: first fetch -> applied topic fully published | ${(workerRun.drainedMs / 1000).toFixed(2)} s | ${Math.round(events / (workerRun.drainedMs / 1000)).toLocaleString('en')} | relay publishes ${workerCounts.outbox.toLocaleString('en')} applied records |${splitRun ? `\n| worker (WORKER_ROLE=apply) + relay process (WORKER_ROLE=relay): first fetch -> applied topic fully published | ${(splitRun.drainedMs / 1000).toFixed(2)} s | ${fmt(published(splitRun))} | the median of its rounds; ${fmt(splitRun.rate)} events/s to the last commit |` : ''}
| ceiling: same apply path (parse + same SQL, batch ${run.batchSize}, ${run.concurrency} lanes) straight at Postgres, no Kafka | ${(ceilingMs / 1000).toFixed(2)} s | ${Math.round(ceilingRate).toLocaleString('en')} | |

Worker / ceiling: **${(ratio * 100).toFixed(0)}%**, the median of the rounds' ratios (target >= 60%: ${ratio >= 0.6 ? 'met' : 'NOT met'}); worker **${Math.round(workerRate).toLocaleString('en')} events/s**, the median round
(target >= 10,000 events/s: ${workerRate >= 10_000 ? 'met' : 'NOT met'}); peak RSS of any worker run ${peakRss.toFixed(0)} MB (its own VmHWM;
target <= 250 MB: ${peakRss <= 250 ? 'met' : 'NOT met'}).

CPU per event, measured (/proc; the worker's own process.cpuUsage()), in microseconds. The first row is the cost of an
applied and published event: at the last commit most applied records are still in the outbox, and the relay's work
on them (node, Postgres, broker) comes after it.
${cpuTable(events, workerRun, splitRun, ceilingRun)}

Outcomes (worker): ${JSON.stringify(workerRun.outcomes)}.
Rows: worker ${JSON.stringify(workerCounts)}; ceiling ${JSON.stringify(ceilingCounts)} (must be equal).

Where the time goes: the CPU table above is measured, not estimated. The worker process includes its outbox relay:
it encodes every applied record with its dozen headers (patches/kafkajs+2.2.4.patch
encodes each into one buffer) and reads the outbox back (\`npx tsx bench/worker/relay-cpu.ts\` measures the relay alone).
Postgres's share is split by \`npx tsx bench/worker/pg-cpu.ts\` (apply path per event and relay per record, read from
the backend's /proc entry), and \`npx tsx bench/worker/explain-chunk.ts 1000 20\` prints the plans of one chunk's
statements. A chunk transaction is 5 round trips: BEGIN, per-key advisory locks, one read (index probes), one
write statement (inbox + state + outbox + anomalies, from array literals and packed bytea parameters), COMMIT.
When both cores are busy, every figure here tracks the load average closely.
${copyCeilingReport(run.rounds, run.copyRounds, run.copyPlan, run.concurrency)}`;
}

const perEventUs = (c: CpuSnapshot | undefined, events: number) =>
  c === undefined ? null : { node: (c.child / events) * 1e6, postgres: (c.postgres / events) * 1e6, kafka: (c.kafka / events) * 1e6 };

/** bench/results/worker.json: every round, and the headline figures over the rounds. */
export function workerResult(run: WorkerBenchRun): BenchResult {
  const events = run.dataset.events.length;
  const { rounds, copyRounds } = run;
  return {
    name: 'worker',
    command: 'npm run bench:worker',
    ranAt: run.ranAt,
    machine: machineNow(run.loadBefore[0]),
    calibrationMs: run.calibrationMs,
    versions: versionsNow({ kafka: run.kafkaVersion, postgres: run.pgVersion }),
    settings: {
      events,
      resources: run.resources,
      partitions: run.partitions,
      batchSize: run.batchSize,
      partitionsConcurrency: run.concurrency,
      maxBytesPerPartition: run.maxBytesPerPartition,
      nodeArgs: run.nodeArgs.join(' '),
      relay: 'inline',
    },
    rounds: rounds.map((r, i) => ({
      round: i + 1,
      workerEventsPerSecond: r.worker.rate,
      ceilingEventsPerSecond: r.ceiling.rate,
      copyCeilingEventsPerSecond: copyRounds[i]?.rate ?? null,
      workerPerCeiling: r.worker.rate / r.ceiling.rate,
      workerPeakRssMb: r.worker.peakRssMb,
      publishedEventsPerSecond: events / (r.worker.drainedMs / 1000),
      workerCpuUsPerEventToPublished: perEventUs(r.worker.cpuToPublished, events),
      relayProcess: r.split
        ? {
            workerEventsPerSecond: r.split.rate,
            publishedEventsPerSecond: events / (r.split.drainedMs / 1000),
            cpuUsPerEventToPublished: perEventUs(r.split.cpuToPublished, events),
            applyWorkerPeakRssMb: r.split.peakRssMb,
            relayPeakRssMb: r.split.relayProcess?.peakRssMb ?? null,
          }
        : null,
      workerCpuUsPerEvent: perEventUs(r.worker.cpu, events),
      ceilingCpuUsPerEvent: perEventUs(r.ceiling.cpu, events),
      outcomes: r.worker.outcomes,
    })),
    summary: [
      { label: 'worker, first fetch to last commit', unit: 'events/s', values: rounds.map((r) => r.worker.rate) },
      { label: 'fully published, relay inline', unit: 'events/s', values: rounds.map((r) => events / (r.worker.drainedMs / 1000)) },
      {
        label: 'fully published, relay in its own process',
        unit: 'events/s',
        values: rounds.flatMap((r) => (r.split ? [events / (r.split.drainedMs / 1000)] : [])),
      },
      { label: 'same-SQL ceiling, no Kafka', unit: 'events/s', values: rounds.map((r) => r.ceiling.rate) },
      { label: 'worker / same-SQL ceiling', unit: '%', values: rounds.map((r) => (100 * r.worker.rate) / r.ceiling.rate), target: '≥ 60%' },
      { label: 'COPY ceiling', unit: 'events/s', values: copyRounds.map((r) => r.rate) },
      { label: 'worker peak RSS', unit: 'MB', values: rounds.map((r) => r.worker.peakRssMb), target: '≤ 250 MB' },
    ],
  };
}
