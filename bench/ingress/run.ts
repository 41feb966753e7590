// Ingress throughput and latency against (a) a bare node:http server that reads the body and
// answers 202, and (b) the full ingress (verify, parse, publish, wait for acks=all), in one run.
//   npm run bench:ingress        (KAFKA_BROKERS, default 127.0.0.1:9092; writes bench/results/ingress.md and .json)
// Both servers run as child processes so their peak RSS (VmHWM) is theirs alone; the load
// generator runs here: 100 keep-alive connections, 1 KiB signed bodies over 10,000 resource ids.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import path from 'node:path';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import { buildBundles } from '../../infra/build/build.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { parseBrokers } from '#plumbing/kafka/client.ts';
import {
  BODY_BYTES,
  CONNECTIONS,
  DURATION_MS,
  benchTopic,
  fixedRate,
  measure,
  measureRound,
  type Measured,
  POOL_SIZE,
  RESOURCE_IDS,
  startServer,
  summarise,
  WARMUP_MS,
  warmUp,
} from './load.ts';
import { machineNow, versionsNow, writeBenchResult } from '../lib/results.ts';

// Measured rounds alternate (a) and (b), so both see the same machine over the same minutes; the
// reported ratio is the median of the per-round ratios (these 2-core machines are noisy).
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
// The ingress's production flags and allocator environment (infra/dev/services.ts), unless
// BENCH_NODE_FLAGS says otherwise (the environment stays; the bare server runs with the same flags, without it).
const NODE_FLAGS = (process.env.BENCH_NODE_FLAGS ?? serviceSpecs.ingress.nodeArgs.join(' ')).split(' ').filter(Boolean);
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');

/** The round with the median value of `by` (rounds sorted by it; the lower middle for an even count). */
function medianBy<T>(rounds: T[], by: (r: T) => number): T {
  return [...rounds].sort((x, y) => by(x) - by(y))[Math.floor((rounds.length - 1) / 2)]!;
}

const { admin, settings, ingressEnv, remove } = await benchTopic('bench-ingress', brokers);
const loadBefore = loadavg();
const ranAt = new Date().toISOString();
// Both from esbuild bundles, as npm start runs the ingress (infra/build/build.ts).
const [bareBundle, ingressBundle] = (await buildBundles(['bench/ingress/bare-server.ts', serviceSpecs.ingress.main])) as [string, string];
const bare = await startServer(bareBundle, {}, NODE_FLAGS);
const ingress = await startServer(ingressBundle, { ...serviceSpecs.ingress.env, ...ingressEnv }, NODE_FLAGS, true);
await warmUp('(a) bare node:http', bare);
const ingressWarmupOk = await warmUp('(b) ingress', ingress);
const rounds: Array<{ a: Omit<Measured, 'warmupOk'>; b: Omit<Measured, 'warmupOk'>; ratio: number }> = [];
for (let round = 1; round <= ROUNDS; round += 1) {
  const roundA = await measureRound(`round ${round} (a) bare node:http`, bare);
  const roundB = await measureRound(`round ${round} (b) ingress`, ingress);
  rounds.push({ a: roundA, b: roundB, ratio: roundB.peak.rps / roundA.peak.rps });
}
await bare.stop();
const medianRound = medianBy(rounds, (r) => r.ratio);
const a = medianRound.a;
const b = {
  ...medianBy(
    rounds.map((r) => r.b),
    (r) => r.peak.rps,
  ),
  warmupOk: ingressWarmupOk,
};
const halfRate = Math.max(1, Math.floor(b.peak.rps / 2));
console.error(`[bench] (b) ingress: fixed rate ${halfRate} req/s for ${DURATION_MS} ms`);
const half = summarise(await fixedRate(ingress.port, halfRate, DURATION_MS));
console.error(`[bench] (b) at half rate: p50 ${half.p50.toFixed(2)} ms, p99 ${half.p99.toFixed(2)} ms`);
const ingressRss = ingress.peakRssMb();
await ingress.stop();

// The same ingress with Node's default heap flags, for the memory comparison.
const plainIngress = await startServer(ingressBundle, ingressEnv, [], true);
const plain = await measure('(b) ingress, default node flags', plainIngress);
await plainIngress.stop();

const offsets = await admin.fetchTopicOffsets(settings.events);
const records = offsets.reduce((sum, p) => sum + Number(p.high), 0);
await remove();

const loadAfter = loadavg();
const machine = machineNow(loadBefore[0]);
const fmt = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
const ratio = medianRound.ratio;
const roundsOk = rounds.reduce((sum, r) => sum + r.b.peak.ok, 0);
const others = (r: { other: Record<string, number> }) => (Object.keys(r.other).length ? JSON.stringify(r.other) : 'none');
const ingressAcks = b.warmupOk + roundsOk + half.ok + plain.warmupOk + plain.peak.ok;
const report = `# Ingress benchmark

Run with \`npm run bench:ingress\` (bench/ingress/run.ts) on ${new Date().toISOString()}.

Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM; Node ${process.version};
Apache Kafka ${KAFKA_VERSION} (single local KRaft broker at ${brokers.join(',')}, the same machine), kafkajs 2.2.4.
Load: ${CONNECTIONS} keep-alive connections from one Node process on the same machine (it shares the ${cpus().length} cores with the
server and the broker), ${BODY_BYTES} B hmac-sha256-signed theme.updated bodies over ${RESOURCE_IDS.toLocaleString('en')} resource ids,
signed up front (a pool of ${POOL_SIZE.toLocaleString('en')}, reused round-robin); ${WARMUP_MS / 1000} s warm-up of each server, then ${ROUNDS} rounds of
${DURATION_MS / 1000} s (a) followed by ${DURATION_MS / 1000} s (b). Topic: 12 partitions, replication 1,
acks=all, idempotent producer. Servers run as \`node ${NODE_FLAGS.join(' ')} <bundle>\` (esbuild bundles, infra/build/build.ts, as npm start runs the ingress), the ingress with ${
  Object.entries(serviceSpecs.ingress.env)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ') || 'no extra environment'
}. Ingress logs one JSON line per request (LOG_LEVEL=${ingressEnv.LOG_LEVEL}, to a file).

Machine load average (1 min) before / after the run: ${fmt(loadBefore[0]!, 2)} / ${fmt(loadAfter[0]!, 2)} (other work on the
machine competes for the same ${cpus().length} cores; CPU ms per request is the figure least affected by it).

Rounds (each: (a) then (b), back to back):

| round | (a) req/s | (b) req/s | b/a | (a) CPU ms/request | (b) CPU ms/request |
|---|---:|---:|---:|---:|---:|
${rounds.map((r, i) => `| ${i + 1} | ${fmt(r.a.peak.rps, 0)} | ${fmt(r.b.peak.rps, 0)} | ${fmt(r.ratio, 2)} | ${fmt(r.a.cpuMsPerRequest, 3)} | ${fmt(r.b.cpuMsPerRequest, 3)} |`).join('\n')}

Summary: (a) is the round with the median ratio; (b) is the median (b) round; the half rate is half of that.

| server | req/s (2xx) | p50 ms | p99 ms | server CPU ms/request | peak RSS MB | non-2xx |
|---|---:|---:|---:|---:|---:|---|
| (a) bare node:http, read body, 202 | ${fmt(a.peak.rps, 0)} | ${fmt(a.peak.p50, 2)} | ${fmt(a.peak.p99, 2)} | ${fmt(a.cpuMsPerRequest, 3)} | ${fmt(a.rssMb)} | ${others(a.peak)} |
| (b) ingress, verified + published, acks=all | ${fmt(b.peak.rps, 0)} | ${fmt(b.peak.p50, 2)} | ${fmt(b.peak.p99, 2)} | ${fmt(b.cpuMsPerRequest, 3)} | ${fmt(ingressRss)} | ${others(b.peak)} |
| (b) at half its peak rate, ${halfRate} req/s fixed (open loop) | ${fmt(half.rps, 0)} | ${fmt(half.p50, 2)} | ${fmt(half.p99, 2)} | | (same process) | ${others(half)} |
| (b) again with Node's defaults (no ${NODE_FLAGS.join(' ')}, no ${Object.keys(serviceSpecs.ingress.env).join(' ')}) | ${fmt(plain.peak.rps, 0)} | ${fmt(plain.peak.p50, 2)} | ${fmt(plain.peak.p99, 2)} | ${fmt(plain.cpuMsPerRequest, 3)} | ${fmt(plain.rssMb)} | ${others(plain.peak)} |

- Ratio b/a: **${fmt(ratio, 3)}**, the median of the rounds' ${rounds.map((r) => fmt(r.ratio, 3)).join(', ')} (target ≥ 0.5) — ${ratio >= 0.5 ? 'met' : 'NOT met'}.
- p99 at half of b's peak rate: **${fmt(half.p99, 2)} ms** (target ≤ 50 ms) — ${half.p99 <= 50 ? 'met' : 'NOT met'}.
- Ingress peak RSS: **${fmt(ingressRss)} MB** (target ≤ 150 MB) — ${ingressRss <= 150 ? 'met' : 'NOT met'}.
- Reconciliation: ${records} records on the topic, ${ingressAcks} 2xx answers from the ingress (all ingress phases) — ${records === ingressAcks ? 'equal' : 'DIFFERENT'}.

Latency at the fixed rate counts from each request's due time (open loop), so queueing behind a stall is included.
`;
writeFileSync(path.join(repoRoot, 'bench', 'results', 'ingress.md'), report);
writeBenchResult({
  name: 'ingress',
  command: 'npm run bench:ingress',
  ranAt,
  machine,
  versions: versionsNow({ kafka: KAFKA_VERSION }),
  settings: {
    rounds: ROUNDS,
    durationMs: DURATION_MS,
    warmupMs: WARMUP_MS,
    connections: CONNECTIONS,
    bodyBytes: BODY_BYTES,
    nodeFlags: NODE_FLAGS.join(' '),
    env: serviceSpecs.ingress.env,
  },
  rounds: rounds.map((r, i) => ({
    round: i + 1,
    bareReqPerSecond: r.a.peak.rps,
    ingressReqPerSecond: r.b.peak.rps,
    ratio: r.ratio,
    bareCpuMsPerRequest: r.a.cpuMsPerRequest,
    ingressCpuMsPerRequest: r.b.cpuMsPerRequest,
  })),
  summary: [
    { label: 'ratio ingress / bare node:http', unit: '', values: rounds.map((r) => r.ratio), target: '≥ 0.5' },
    { label: 'ingress throughput', unit: 'req/s', values: rounds.map((r) => r.b.peak.rps) },
    { label: 'ingress CPU per request', unit: 'ms', values: rounds.map((r) => r.b.cpuMsPerRequest) },
    { label: `p99 at half the peak rate (${halfRate} req/s)`, unit: 'ms', values: [half.p99], target: '≤ 50 ms' },
    { label: 'ingress peak RSS', unit: 'MB', values: [ingressRss], target: '≤ 150 MB' },
    { label: 'ingress peak RSS with Node defaults', unit: 'MB', values: [plain.rssMb] },
  ],
});
console.log(report);
