// Ingress throughput and latency against (a) a bare node:http server that reads the body and
// answers 202, and (b) the full ingress (verify, parse, publish, wait for acks=all), in one run.
//   npm run bench:ingress        (KAFKA_BROKERS, default 127.0.0.1:9092; writes bench/results/ingress.md)
// Both servers run as child processes so their peak RSS (VmHWM) is theirs alone; the load
// generator runs here: 100 keep-alive connections, 1 KiB signed bodies over 10,000 resource ids.
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { brokerReady, KAFKA_VERSION } from '../../infra/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import { serviceSpecs } from '../../infra/services.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { ensureTopics, topicNames, topicSpecs, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { signWebhook } from '#domain/signing/index.ts';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100);
// Measured rounds alternate (a) and (b), so both see the same machine over the same minutes; the
// reported ratio is the median of the per-round ratios (these 2-core machines are noisy).
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 8_000);
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 3000);
const RESOURCE_IDS = 10_000;
// The ingress start command's node flags (infra/up.ts should use the same): a bounded young
// generation keeps V8 from growing the heap to several times the live data under a high
// allocation rate (the default is sized from the machine's RAM).
// The ingress's production flags (infra/services.ts), unless BENCH_NODE_FLAGS says otherwise.
const NODE_FLAGS = (process.env.BENCH_NODE_FLAGS ?? serviceSpecs.ingress.nodeArgs.join(' ')).split(' ').filter(Boolean);
const BODY_BYTES = 1024;

const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');
const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev.env'), 'utf8')) as Record<string, string>;
const secret = devEnv.DEMO_SECRET!;

function signedBody(): { body: Buffer; headers: Record<string, string> } {
  const event = sampleThemeEvent({ resource: { id: `theme_${Math.floor(Math.random() * RESOURCE_IDS)}` } });
  const data = event.data as { name: string };
  const size = Buffer.byteLength(JSON.stringify(event));
  data.name = `${data.name} ${'x'.repeat(Math.max(0, BODY_BYTES - size - 1))}`;
  const body = Buffer.from(JSON.stringify(event));
  const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id: event.event_id });
  return { body, headers: { ...headers, 'content-length': String(body.length) } };
}

// Signed up front so the generator, which shares the cores with the server and the broker,
// spends its CPU on HTTP rather than on HMACs; the pool is reused round-robin (the ingress
// does not deduplicate, the worker does) and is fresh enough for the 300 s timestamp window.
const POOL_SIZE = Number(process.env.BENCH_POOL ?? 20_000);
const pool = Array.from({ length: POOL_SIZE }, signedBody);
let poolIndex = 0;

function request(agent: http.Agent, port: number): Promise<number> {
  const { body, headers } = pool[poolIndex++ % POOL_SIZE]!;
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/webhooks/demo', agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

interface LoadResult {
  requests: number;
  ok: number;
  other: Record<string, number>;
  seconds: number;
  latenciesMs: Float64Array;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summarise(result: LoadResult) {
  const sorted = result.latenciesMs.slice().sort();
  return { rps: result.ok / result.seconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99), ...result };
}

/** Closed loop: each connection sends its next request as soon as the previous one is answered. */
async function closedLoop(port: number, durationMs: number): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const latencies: number[] = [];
  const other: Record<string, number> = {};
  let ok = 0;
  const started = performance.now();
  const end = started + durationMs;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const status = await request(agent, port);
        latencies.push(performance.now() - t0);
        if (status === 202) ok += 1;
        else other[status] = (other[status] ?? 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { requests: latencies.length, ok, other, seconds, latenciesMs: Float64Array.from(latencies) };
}

/**
 * Open loop at a fixed rate: request i is due at start + i/rate and its latency counts from
 * then, so a stall shows up in the percentiles instead of silently slowing the generator.
 */
async function fixedRate(port: number, rate: number, durationMs: number): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const latencies: number[] = [];
  const other: Record<string, number> = {};
  let ok = 0;
  let next = 0;
  const total = Math.floor((rate * durationMs) / 1000);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      for (;;) {
        const i = next++;
        if (i >= total) return;
        const due = started + (i * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        const status = await request(agent, port);
        latencies.push(performance.now() - due);
        if (status === 202) ok += 1;
        else other[status] = (other[status] ?? 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { requests: latencies.length, ok, other, seconds, latenciesMs: Float64Array.from(latencies) };
}

interface Server {
  child: ChildProcess;
  port: number;
  peakRssMb: () => number;
  /** user + system CPU seconds the server process has used so far. */
  cpuSeconds: () => number;
  stop: () => Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.once('error', reject);
  });
}

async function startServer(file: string, env: Record<string, string>, nodeFlags: string[], waitReady = false): Promise<Server> {
  const port = await freePort();
  const adminPort = await freePort();
  // Logs go to a file, not a pipe: a pipe the busy load generator drains late would stall the
  // server's synchronous log writes, which is a property of this bench, not of the server.
  const logFile = path.join(tmpdir(), `bench-${path.basename(file, '.ts')}-${process.pid}.log`);
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', path.join(repoRoot, file)], {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH ?? '',
      ...env,
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      HOST: '127.0.0.1',
    },
    stdio: ['ignore', openSync(logFile, 'w'), 'inherit'],
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${file} exited with ${child.exitCode}; see ${logFile}`);
    if (Date.now() > deadline) throw new Error(`${file} did not listen on ${port} within 30 s`);
    const listening = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    // The ingress listens before its first broker probe; measure from readiness on.
    const ready =
      listening &&
      (!waitReady ||
        (await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
          (r) => r.ok,
          () => false,
        )));
    if (ready) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    child,
    port,
    peakRssMb: () => {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
      return kb / 1024;
    },
    cpuSeconds: () => {
      // /proc/<pid>/stat fields 14 and 15 (after the parenthesised command) in clock ticks (100 Hz).
      const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) / 100;
    },
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

interface Measured {
  peak: ReturnType<typeof summarise>;
  cpuMsPerRequest: number;
  warmupOk: number;
  rssMb: number;
}

async function warmUp(name: string, server: Server): Promise<number> {
  console.error(`[bench] ${name}: warm-up ${WARMUP_MS} ms`);
  const ok = (await closedLoop(server.port, WARMUP_MS)).ok;
  console.error(`[bench] ${name}: peak RSS so far (VmHWM) ${server.peakRssMb().toFixed(1)} MB`);
  return ok;
}

async function measureRound(name: string, server: Server): Promise<Omit<Measured, 'warmupOk'>> {
  console.error(`[bench] ${name}: ${CONNECTIONS} connections for ${DURATION_MS} ms`);
  const cpuBefore = server.cpuSeconds();
  const peak = summarise(await closedLoop(server.port, DURATION_MS));
  const cpuMsPerRequest = ((server.cpuSeconds() - cpuBefore) * 1000) / peak.requests;
  console.error(
    `[bench] ${name}: ${peak.rps.toFixed(0)} req/s, p50 ${peak.p50.toFixed(2)} ms, p99 ${peak.p99.toFixed(2)} ms, peak RSS so far (VmHWM) ${server.peakRssMb().toFixed(1)} MB`,
  );
  return { peak, cpuMsPerRequest, rssMb: server.peakRssMb() };
}

async function measure(name: string, server: Server): Promise<Measured> {
  const warmupOk = await warmUp(name, server);
  return { ...(await measureRound(name, server)), warmupOk };
}

/** The round with the median value of `by` (rounds sorted by it; the lower middle for an even count). */
function medianBy<T>(rounds: T[], by: (r: T) => number): T {
  return [...rounds].sort((x, y) => by(x) - by(y))[Math.floor((rounds.length - 1) / 2)]!;
}

if (!(await brokerReady(brokers))) {
  console.error(`no Kafka broker answers at ${brokers.join(',')} (npm run kafka:start, or set KAFKA_BROKERS)`);
  process.exit(1);
}
const stamp = `bench-ingress-${Date.now().toString(36)}`;
const settings: TopicSettings = {
  events: `${stamp}.events`,
  applied: `${stamp}.applied`,
  eventsPartitions: 12,
  retryLevels: 0,
  replicationFactor: 1,
  minInsyncReplicas: 1,
};
const kafka = createKafka({ brokers, clientId: 'bench-ingress', logger: createLogger({ name: 'bench', level: 'error' }) });
const admin = kafka.admin();
await admin.connect();
await ensureTopics(admin, topicSpecs(settings), 1);

const loadBefore = loadavg();
const ingressEnv = {
  ...devEnv,
  KAFKA_BROKERS: brokers.join(','),
  TOPIC_EVENTS: settings.events,
  WEBHOOK_SOURCES_FILE: 'infra/dev-sources.json',
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
};
const bare = await startServer('bench/ingress/bare-server.ts', {}, NODE_FLAGS);
const ingress = await startServer('services/ingress/main.ts', ingressEnv, NODE_FLAGS, true);
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
const plainIngress = await startServer('services/ingress/main.ts', ingressEnv, [], true);
const plain = await measure('(b) ingress, default node flags', plainIngress);
await plainIngress.stop();

const offsets = await admin.fetchTopicOffsets(settings.events);
const records = offsets.reduce((sum, p) => sum + Number(p.high), 0);
await admin.deleteTopics({ topics: Object.values(topicNames(settings)).flat() }).catch(() => {});
await admin.disconnect();

const loadAfter = loadavg();
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
acks=all, idempotent producer. Servers run as \`node ${NODE_FLAGS.join(' ')} --import tsx <file>\`. Ingress logs one JSON line per request (LOG_LEVEL=${ingressEnv.LOG_LEVEL}, to a file).

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
| (b) again with Node's default flags (no ${NODE_FLAGS.join(' ')}) | ${fmt(plain.peak.rps, 0)} | ${fmt(plain.peak.p50, 2)} | ${fmt(plain.peak.p99, 2)} | ${fmt(plain.cpuMsPerRequest, 3)} | ${fmt(plain.rssMb)} | ${others(plain.peak)} |

- Ratio b/a: **${fmt(ratio, 3)}**, the median of the rounds' ${rounds.map((r) => fmt(r.ratio, 3)).join(', ')} (target ≥ 0.5, issue 12) — ${ratio >= 0.5 ? 'met' : 'NOT met'}.
- p99 at half of b's peak rate: **${fmt(half.p99, 2)} ms** (target ≤ 50 ms) — ${half.p99 <= 50 ? 'met' : 'NOT met'}.
- Ingress peak RSS: **${fmt(ingressRss)} MB** (target ≤ 150 MB, issue 12) — ${ingressRss <= 150 ? 'met' : 'NOT met'}.
- Reconciliation: ${records} records on the topic, ${ingressAcks} 2xx answers from the ingress (all ingress phases) — ${records === ingressAcks ? 'equal' : 'DIFFERENT'}.

Latency at the fixed rate counts from each request's due time (open loop), so queueing behind a stall is included.
`;
// A hand-written "## Notes" section (history, analysis) survives a new run.
const resultsFile = path.join(repoRoot, 'bench', 'results', 'ingress.md');
const previous = (() => {
  try {
    return readFileSync(resultsFile, 'utf8');
  } catch {
    return '';
  }
})();
const notesAt = previous.indexOf('\n## Notes');
writeFileSync(resultsFile, notesAt >= 0 ? report + previous.slice(notesAt) : report);
console.log(report);
