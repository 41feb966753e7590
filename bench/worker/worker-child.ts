// Runs one worker (the real startWorker) in its own process so its peak RSS is its own.
// Prints one JSON line with the timings when the group has committed every end offset.
import { open } from 'node:fs/promises';
import { countUnpublishedOutbox } from '#domain/store/outbox.ts';
import { loadConfigOrExit } from '#plumbing/config/env.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { workerConfigFromEnv, workerEnvSchema } from '#services/worker/config.ts';
import { startWorker } from '#services/worker/worker.ts';

const config = workerConfigFromEnv(loadConfigOrExit(workerEnvSchema));
const ends = new Map<number, number>(
  Object.entries(JSON.parse(process.env.BENCH_END_OFFSETS ?? '{}') as Record<string, number>).map(([p, o]) => [Number(p), o]),
);
// Per-event logs are produced and serialised as in production, then discarded.
const devNull = await open('/dev/null', 'w');
const logger = createLogger({ name: 'worker', level: config.logLevel }, devNull.createWriteStream());
const worker = await startWorker(config, { logger, adminServer: false });

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
const rssAtCommitMb = process.resourceUsage().maxRSS / 1024;
const outbox = () => countUnpublishedOutbox(worker.pool);
while ((await outbox()) > 0) await new Promise((r) => setTimeout(r, 50));
const drainedMs = performance.now() - firstFetch!;
const outcomes = Object.fromEntries(
  (await worker.registry.getSingleMetric('webhook_events_processed_total')!.get()).values.map((v) => [v.labels['outcome'], v.value]),
);
await worker.close();
console.log(JSON.stringify({ consumedMs, drainedMs, rssAtCommitMb, peakRssMb: process.resourceUsage().maxRSS / 1024, outcomes }));
process.exit(0);
