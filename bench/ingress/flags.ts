// Node flag sets for the ingress, side by side: each set runs in several fresh ingress processes,
// the sets alternating (A B A B ...), so every set sees the same minutes of this noisy machine and
// the process-to-process spread of the peak RSS shows up instead of one lucky or unlucky process.
//   BENCH_FLAG_SETS='from=source --max-semi-space-size=8|--max-semi-space-size=8' \
//     BENCH_PROCESSES=3 npx tsx bench/ingress/flags.ts
// A NAME=value token in a set is an environment variable of the ingress (MALLOC_ARENA_MAX=2).
// Per process: warm-up, BENCH_ROUNDS closed-loop rounds at full rate (100 connections), then its
// own VmHWM. Writes bench/results/ingress-flags.md and .json.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import path from 'node:path';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import { buildBundles } from '../../infra/build/build.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { parseBrokers } from '#plumbing/kafka/client.ts';
import { machineNow, versionsNow, writeBenchResult } from '../lib/results.ts';
import { benchTopic, CONNECTIONS, DURATION_MS, measureRound, startServer, WARMUP_MS, warmUp } from './load.ts';

// The ingress runs from its bundle (infra/build/build.ts) as npm start runs it; a set that starts with
// `from=source` runs services/ingress/main.ts through tsx's loader instead.
const productionSet = [
  ...serviceSpecs.ingress.nodeArgs,
  ...Object.entries(serviceSpecs.ingress.env).map(([name, value]) => `${name}=${value}`),
];
const FLAG_SETS = (process.env.BENCH_FLAG_SETS ?? productionSet.join(' ')).split('|').map((set) => set.split(' ').filter(Boolean));
const [ingressBundle] = (await buildBundles([serviceSpecs.ingress.main])) as [string];
const mainOf = (flags: string[]) => (flags.includes('from=source') ? serviceSpecs.ingress.main : ingressBundle);
const isEnv = (token: string) => /^[A-Z][A-Z0-9_]*=/.test(token);
const nodeFlagsOf = (flags: string[]) => flags.filter((f) => f !== 'from=source' && !isEnv(f));
const envOf = (flags: string[]) =>
  Object.fromEntries(flags.filter(isEnv).map((f) => [f.slice(0, f.indexOf('=')), f.slice(f.indexOf('=') + 1)]));
const PROCESSES = Number(process.env.BENCH_PROCESSES ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');

const { ingressEnv, remove } = await benchTopic('bench-ingress-flags', brokers);

interface Run {
  set: number;
  rps: number[];
  cpuMsPerRequest: number[];
  warmupHwmMb: number;
  hwmMb: number;
}
const runs: Run[] = [];
const loadBefore = loadavg();
const startedAt = new Date();
for (let process_ = 0; process_ < PROCESSES; process_ += 1) {
  for (const [set, flags] of FLAG_SETS.entries()) {
    const name = `set ${set + 1} process ${process_ + 1} (${flags.join(' ') || 'no flags'})`;
    const server = await startServer(mainOf(flags), { ...ingressEnv, ...envOf(flags) }, nodeFlagsOf(flags), true);
    await warmUp(name, server);
    const warmupHwmMb = server.peakRssMb();
    const rounds = [];
    for (let round = 1; round <= ROUNDS; round += 1) rounds.push(await measureRound(`${name} round ${round}`, server));
    runs.push({
      set,
      rps: rounds.map((r) => r.peak.rps),
      cpuMsPerRequest: rounds.map((r) => r.cpuMsPerRequest),
      warmupHwmMb,
      hwmMb: server.peakRssMb(),
    });
    await server.stop();
  }
}
await remove();
const loadAfter = loadavg();
const machine = machineNow(loadBefore[0]);

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor((values.length - 1) / 2)]!;
const fmt = (n: number, d = 0) => n.toFixed(d);
const report = `# Ingress node flags, side by side

Run with \`npx tsx bench/ingress/flags.ts\` (bench/ingress/flags.ts) on ${startedAt.toISOString()}.

Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM; Node ${process.version};
Apache Kafka ${KAFKA_VERSION} (single local broker, the same machine). Load average (1 min) before / after: ${fmt(loadBefore[0]!, 2)} / ${fmt(loadAfter[0]!, 2)}.
Each process: ${WARMUP_MS / 1000} s warm-up, then ${ROUNDS} rounds of ${DURATION_MS / 1000} s closed loop with ${CONNECTIONS} connections
(1 KiB signed theme events, acks=all, LOG_LEVEL=${ingressEnv.LOG_LEVEL}); the sets alternate process by process.

| set | node flags | process | req/s per round | CPU ms/request per round | VmHWM after warm-up | VmHWM at the end |
|---|---|---:|---|---|---:|---:|
${runs
  .map(
    (r, i) =>
      `| ${r.set + 1} | \`${FLAG_SETS[r.set]!.join(' ') || '(none)'}\` | ${Math.floor(i / FLAG_SETS.length) + 1} | ${r.rps.map((x) => fmt(x)).join(' / ')} | ${r.cpuMsPerRequest.map((x) => fmt(x, 3)).join(' / ')} | ${fmt(r.warmupHwmMb, 1)} MB | ${fmt(r.hwmMb, 1)} MB |`,
  )
  .join('\n')}

| set | node flags | median req/s (all rounds) | median CPU ms/request | peak RSS, median / max of the processes |
|---|---|---:|---:|---:|
${FLAG_SETS.map((flags, set) => {
  const mine = runs.filter((r) => r.set === set);
  return `| ${set + 1} | \`${flags.join(' ') || '(none)'}\` | ${fmt(median(mine.flatMap((r) => r.rps)))} | ${fmt(median(mine.flatMap((r) => r.cpuMsPerRequest)), 3)} | ${fmt(median(mine.map((r) => r.hwmMb)), 1)} / ${fmt(Math.max(...mine.map((r) => r.hwmMb)), 1)} MB |`;
}).join('\n')}
`;
writeFileSync(path.join(repoRoot, 'bench', 'results', 'ingress-flags.md'), report);
const setName = (set: number) => FLAG_SETS[set]!.join(' ') || '(none)';
writeBenchResult({
  name: 'ingress-flags',
  command: 'npx tsx bench/ingress/flags.ts',
  ranAt: startedAt.toISOString(),
  machine,
  versions: versionsNow({ kafka: KAFKA_VERSION }),
  settings: {
    flagSets: FLAG_SETS.map((_, set) => setName(set)),
    processes: PROCESSES,
    rounds: ROUNDS,
    warmupMs: WARMUP_MS,
    durationMs: DURATION_MS,
    connections: CONNECTIONS,
  },
  rounds: runs.flatMap((r, i) =>
    r.rps.map((rps, round) => ({
      set: setName(r.set),
      process: Math.floor(i / FLAG_SETS.length) + 1,
      round: round + 1,
      reqPerSecond: rps,
      cpuMsPerRequest: r.cpuMsPerRequest[round],
      vmHwmAfterWarmupMb: r.warmupHwmMb,
      vmHwmAtEndMb: r.hwmMb,
    })),
  ),
  summary: FLAG_SETS.flatMap((_, set) => {
    const mine = runs.filter((r) => r.set === set);
    return [
      { label: `req/s, ${setName(set)}`, unit: 'req/s', values: mine.flatMap((r) => r.rps) },
      { label: `peak RSS, ${setName(set)}`, unit: 'MB', values: mine.map((r) => r.hwmMb) },
    ];
  }),
});
console.log(report);
