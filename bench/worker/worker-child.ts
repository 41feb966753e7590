// Runs one worker (the real startWorker) in its own process so its peak RSS is its own.
// Prints one JSON line with the timings when the group has committed every end offset.
import { open } from 'node:fs/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { countUnpublishedOutbox } from '#domain/store/outbox.ts';
import { loadConfigOrExit } from '#plumbing/config/env.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { workerConfigFromEnv, workerEnvSchema } from '#services/worker/config.ts';
import { startWorker } from '#services/worker/worker.ts';
import { procStatusMb } from '../lib/rss.ts';

const config = workerConfigFromEnv(loadConfigOrExit(workerEnvSchema));
const ends = new Map<number, number>(
  Object.entries(JSON.parse(process.env.BENCH_END_OFFSETS ?? '{}') as Record<string, number>).map(([p, o]) => [Number(p), o]),
);
// Per-event logs are produced and serialised as in production, then discarded (or kept in
// BENCH_WORKER_LOG_FILE, to see why a run stalls).
const devNull = await open(process.env.BENCH_WORKER_LOG_FILE ?? '/dev/null', 'w');
const logger = createLogger({ name: 'worker', level: config.logLevel }, devNull.createWriteStream());
const worker = await startWorker(config, { logger, adminServer: false });
// BENCH_MEMORY_SAMPLES=1: the main isolate's memory at the moment of the process's RSS peak (stderr).
let memoryAtPeak: Record<string, number> | undefined;
if (process.env.BENCH_MEMORY_SAMPLES === '1') {
  const { getHeapSpaceStatistics } = await import('node:v8');
  setInterval(() => {
    const m = process.memoryUsage();
    if (memoryAtPeak !== undefined && m.rss <= memoryAtPeak.rss! * 2 ** 20) return;
    memoryAtPeak = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Math.round(v / 2 ** 20)]));
    for (const space of getHeapSpaceStatistics()) memoryAtPeak[space.space_name] = Math.round(space.space_used_size / 2 ** 20);
  }, 100).unref();
}

// BENCH_GC_STATS=1: time in garbage collection by kind, from the first fetch to the last commit (stderr).
const gc = { minor: { count: 0, ms: 0 }, major: { count: 0, ms: 0 }, incremental: { count: 0, ms: 0 }, weakcb: { count: 0, ms: 0 } };
if (process.env.BENCH_GC_STATS === '1') {
  const { PerformanceObserver, constants } = await import('node:perf_hooks');
  const kinds: Record<number, keyof typeof gc> = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
    [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
  };
  new PerformanceObserver((list) => {
    if (firstFetch === undefined || lastCommit !== undefined) return;
    for (const entry of list.getEntries()) {
      const kind = kinds[(entry as unknown as { detail: { kind: number } }).detail.kind];
      if (kind === undefined) continue;
      gc[kind].count += 1;
      gc[kind].ms += entry.duration;
    }
  }).observe({ entryTypes: ['gc'] });
}

// BENCH_PROMOTION_PROFILE=<file>: a sampling heap profile of what outlived the young generation
// (objects later freed by a major GC included, those freed by a scavenge not): what gets promoted.
const promotionProfile = process.env.BENCH_PROMOTION_PROFILE;
const inspector = promotionProfile ? new (await import('node:inspector/promises')).Session() : undefined;
if (inspector) {
  inspector.connect();
  await inspector.post('HeapProfiler.startSampling', {
    samplingInterval: 64 * 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: false,
  });
}

// BENCH_LOOP_DELAY=1: the event loop's delay while the worker applies (first fetch -> last commit)
// and while only the relay still publishes (last commit -> fully published), and the outbox rows
// left at the last commit (stderr): how long the relay's steps wait behind the apply path.
const loopDelay = process.env.BENCH_LOOP_DELAY === '1' ? monitorEventLoopDelay({ resolution: 1 }) : undefined;
const loopDelays: Record<string, { p50: number; p90: number; p99: number; max: number }> = {};
const takeLoopDelay = (phase: string) => {
  if (!loopDelay) return;
  const ms = (ns: number) => Math.round(ns / 1e5) / 10;
  loopDelays[phase] = {
    p50: ms(loopDelay.percentile(50)),
    p90: ms(loopDelay.percentile(90)),
    p99: ms(loopDelay.percentile(99)),
    max: ms(loopDelay.max),
  };
  loopDelay.reset();
};
let firstFetch: number | undefined;
let lastCommit: number | undefined;
const committed = new Map<number, number>();
const { consumer } = worker;
// The parent samples the broker's and Postgres's CPU at these marks (one JSON line each on stdout).
const mark = (event: string) => {
  const cpu = process.cpuUsage();
  console.log(JSON.stringify({ event, cpuSeconds: (cpu.user + cpu.system) / 1e6 }));
};
consumer.on(consumer.events.START_BATCH_PROCESS, () => {
  if (firstFetch !== undefined) return;
  firstFetch = performance.now();
  loopDelay?.enable();
  mark('first-fetch');
});
const done = new Promise<void>((resolve) => {
  consumer.on(consumer.events.COMMIT_OFFSETS, (e) => {
    for (const t of e.payload.topics) for (const p of t.partitions) committed.set(Number(p.partition), Number(p.offset));
    if ([...ends].every(([p, end]) => (committed.get(p) ?? 0) >= end)) {
      if (lastCommit === undefined) {
        lastCommit = performance.now();
        mark('last-commit');
      }
      resolve();
    }
  });
});
await done;
const consumedMs = lastCommit! - firstFetch!;
// VmHWM, not process.resourceUsage().maxRSS: a spawned child's ru_maxrss starts at its parent's RSS
// at fork (the forked copy of the parent's memory counts until exec), so it reported the bench
// process's size whatever the worker used.
const rssAtCommitMb = procStatusMb(process.pid, 'VmHWM');
const outbox = () => countUnpublishedOutbox(worker.pool);
takeLoopDelay('applying');
const outboxAtCommit = loopDelay ? await outbox() : undefined;
while ((await outbox()) > 0) await new Promise((r) => setTimeout(r, 50));
const drainedMs = performance.now() - firstFetch!;
mark('fully-published');
takeLoopDelay('relay only');
if (loopDelay)
  console.error(`event loop delay (ms): ${JSON.stringify(loopDelays)}; outbox rows left at the last commit: ${outboxAtCommit}`);
const outcomes = Object.fromEntries(
  (await worker.registry.getSingleMetric('webhook_events_processed_total')!.get()).values.map((v) => [v.labels['outcome'], v.value]),
);
if (inspector) {
  const { profile } = await inspector.post('HeapProfiler.stopSampling');
  (await import('node:fs')).writeFileSync(promotionProfile!, JSON.stringify(profile));
}
await worker.close();
if (process.env.BENCH_GC_STATS === '1') {
  const rounded = Object.fromEntries(Object.entries(gc).map(([k, v]) => [k, { count: v.count, ms: Math.round(v.ms) }]));
  console.error(`garbage collection, first fetch -> last commit (${Math.round(consumedMs)} ms): ${JSON.stringify(rounded)}`);
}
if (memoryAtPeak) console.error(`memory at the RSS peak (MB): ${JSON.stringify(memoryAtPeak)}`);
console.log(JSON.stringify({ consumedMs, drainedMs, rssAtCommitMb, peakRssMb: procStatusMb(process.pid, 'VmHWM'), outcomes }));
process.exit(0);
