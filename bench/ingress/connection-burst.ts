// New connections at a busy ingress, with one listening socket against several (LISTEN_SOCKETS,
// services/ingress/listeners.ts), side by side. libuv accepts one connection per listening socket
// and turn of the event loop; a loaded ingress turns a few hundred times a second, so senders that
// open a connection per delivery (no keep-alive) can outrun what one socket accepts, and their
// requests wait in the kernel's accept queue before the ingress reads a byte of them.
//
// Per process (a fresh ingress from its bundle, production flags): warm-up, then for each round
// BENCH_DURATION_MS of two loads at once: a closed loop on BENCH_KEEPALIVE_CONNECTIONS keep-alive
// connections (providers with a pool, which keep the event loop busy) and an open loop of
// BENCH_NEW_RATE requests a second, each on a new connection. The sets alternate process by process.
//   npx tsx bench/ingress/connection-burst.ts            (BENCH_SOCKET_SETS=1,16 BENCH_PROCESSES=2 BENCH_ROUNDS=2)
// Writes bench/results/ingress-connections.md and .json.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, loadavg, totalmem } from 'node:os';
import path from 'node:path';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import { buildBundles } from '../../infra/build/build.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { parseBrokers } from '#plumbing/kafka/client.ts';
import { machineNow, versionsNow, writeBenchResult } from '../lib/results.ts';
import { benchTopic, closedLoop, percentile, signedBody, startServer, warmUp, type Server } from './load.ts';

const SOCKET_SETS = (process.env.BENCH_SOCKET_SETS ?? '1,16').split(',').map(Number);
const PROCESSES = Number(process.env.BENCH_PROCESSES ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 8000);
const NEW_RATE = Number(process.env.BENCH_NEW_RATE ?? 500);
const KEEPALIVE_CONNECTIONS = Number(process.env.BENCH_KEEPALIVE_CONNECTIONS ?? 50);
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');

const [ingressBundle] = (await buildBundles([serviceSpecs.ingress.main])) as [string];
const nodeFlags = [...serviceSpecs.ingress.nodeArgs];
const { ingressEnv, remove } = await benchTopic('bench-ingress-connections', brokers);

interface NewConnections {
  sent: number;
  ok: number;
  errors: number;
  p50: number;
  p99: number;
  max: number;
}

/** One request on a connection of its own; latency from its due time (open loop). */
function freshRequest(port: number, due: number): Promise<{ ms: number; status: number }> {
  const { body, headers } = signedBody();
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, method: 'POST', path: '/webhooks/demo', agent: false, headers: { ...headers, connection: 'close' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ ms: performance.now() - due, status: res.statusCode ?? 0 }));
        res.on('error', () => resolve({ ms: performance.now() - due, status: 0 }));
      },
    );
    req.on('error', () => resolve({ ms: performance.now() - due, status: 0 }));
    req.end(body);
  });
}

async function newConnectionLoad(port: number): Promise<NewConnections> {
  const total = Math.floor((NEW_RATE * DURATION_MS) / 1000);
  const started = performance.now() + 5;
  const answers: Array<Promise<{ ms: number; status: number }>> = [];
  for (let i = 0; i < total; i += 1) {
    const due = started + (i * 1000) / NEW_RATE;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    answers.push(freshRequest(port, due));
  }
  const done = await Promise.all(answers);
  const sorted = Float64Array.from(done.map((d) => d.ms)).sort();
  return {
    sent: total,
    ok: done.filter((d) => d.status === 202).length,
    errors: done.filter((d) => d.status === 0).length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? NaN,
  };
}

/** The deepest the port's accept queues got, summed over its listening sockets (ss, every 50 ms). */
function acceptQueueWatch(port: number): { stop: () => number } {
  let deepest = 0;
  const timer = setInterval(() => {
    try {
      const out = execFileSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' });
      const queued = out
        .trim()
        .split('\n')
        .filter(Boolean)
        .reduce((sum, line) => sum + Number(line.trim().split(/\s+/)[1] ?? 0), 0);
      deepest = Math.max(deepest, queued);
    } catch {
      // ss missing: no queue figure
    }
  }, 50);
  return {
    stop: () => {
      clearInterval(timer);
      return deepest;
    },
  };
}

interface Run {
  sockets: number;
  process: number;
  round: number;
  fresh: NewConnections;
  keepAliveRps: number;
  deepestQueue: number;
}
const runs: Run[] = [];
const loadBefore = loadavg();
const startedAt = new Date();
for (let p = 1; p <= PROCESSES; p += 1) {
  for (const sockets of SOCKET_SETS) {
    const name = `LISTEN_SOCKETS=${sockets} process ${p}`;
    const server: Server = await startServer(
      ingressBundle,
      {
        ...ingressEnv,
        ...serviceSpecs.ingress.env,
        LISTEN_SOCKETS: String(sockets),
        // The load comes from one address and stands for many senders: its share is the whole cap.
        MAX_CLIENT_CONNECTIONS: '1024',
      },
      nodeFlags,
      true,
    );
    await warmUp(name, server);
    for (let round = 1; round <= ROUNDS; round += 1) {
      const queue = acceptQueueWatch(server.port);
      const [fresh, kept] = await Promise.all([newConnectionLoad(server.port), closedLoopOn(server.port)]);
      const run = { sockets, process: p, round, fresh, keepAliveRps: kept, deepestQueue: queue.stop() };
      runs.push(run);
      console.error(
        `[bench] ${name} round ${round}: new connections p50 ${fresh.p50.toFixed(1)} / p99 ${fresh.p99.toFixed(1)} / max ${fresh.max.toFixed(1)} ms, ${fresh.errors} errors; keep-alive ${kept.toFixed(0)} req/s; accept queue at most ${run.deepestQueue}`,
      );
    }
    await server.stop();
  }
}
await remove();

async function closedLoopOn(port: number): Promise<number> {
  const result = await closedLoop(port, DURATION_MS, KEEPALIVE_CONNECTIONS);
  return result.ok / result.seconds;
}

const machine = machineNow(loadBefore[0]);
const loadAfter = loadavg();
const fmt = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor((values.length - 1) / 2)]!;
const report = `# New connections at a busy ingress: one listening socket against several

Run with \`npx tsx bench/ingress/connection-burst.ts\` (bench/ingress/connection-burst.ts) on ${startedAt.toISOString()}.

Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM; Node ${process.version};
Apache Kafka ${KAFKA_VERSION} (single local broker, the same machine). Load average (1 min) before / after: ${fmt(loadBefore[0]!, 2)} / ${fmt(loadAfter[0]!, 2)}.
Each ingress process (bundle, \`node ${nodeFlags.join(' ')}\`): a warm-up, then ${ROUNDS} rounds of ${DURATION_MS / 1000} s of two loads at once:
a closed loop on ${KEEPALIVE_CONNECTIONS} keep-alive connections, and ${NEW_RATE} requests a second (open loop) each on a new
connection (\`Connection: close\`), as senders without keep-alive post. Sets: LISTEN_SOCKETS = ${SOCKET_SETS.join(', ')} (BENCH_SOCKET_SETS). Latency counts from each request's due time. The accept
queue is the port's listening sockets' backlog, read with \`ss\` every 50 ms. The sets alternate process by process.

| LISTEN_SOCKETS | process | round | new connections p50 / p99 / max (ms) | transport errors | keep-alive req/s | accept queue at most |
|---:|---:|---:|---|---:|---:|---:|
${runs.map((r) => `| ${r.sockets} | ${r.process} | ${r.round} | ${fmt(r.fresh.p50)} / ${fmt(r.fresh.p99)} / ${fmt(r.fresh.max)} | ${r.fresh.errors} | ${fmt(r.keepAliveRps, 0)} | ${r.deepestQueue} |`).join('\n')}

| LISTEN_SOCKETS | median p99 of new connections (ms) | median max (ms) | median keep-alive req/s | deepest accept queue |
|---:|---:|---:|---:|---:|
${SOCKET_SETS.map((sockets) => {
  const mine = runs.filter((r) => r.sockets === sockets);
  return `| ${sockets} | ${fmt(median(mine.map((r) => r.fresh.p99)))} | ${fmt(median(mine.map((r) => r.fresh.max)))} | ${fmt(median(mine.map((r) => r.keepAliveRps)), 0)} | ${Math.max(...mine.map((r) => r.deepestQueue))} |`;
}).join('\n')}
`;
writeFileSync(path.join(repoRoot, 'bench', 'results', 'ingress-connections.md'), report);
writeBenchResult({
  name: 'ingress-connections',
  command: 'npx tsx bench/ingress/connection-burst.ts',
  ranAt: startedAt.toISOString(),
  machine,
  versions: versionsNow({ kafka: KAFKA_VERSION }),
  settings: {
    socketSets: SOCKET_SETS,
    processes: PROCESSES,
    rounds: ROUNDS,
    durationMs: DURATION_MS,
    newRate: NEW_RATE,
    keepAliveConnections: KEEPALIVE_CONNECTIONS,
    nodeFlags: nodeFlags.join(' '),
  },
  rounds: runs.map((r) => ({
    listenSockets: r.sockets,
    process: r.process,
    round: r.round,
    newConnectionP50Ms: r.fresh.p50,
    newConnectionP99Ms: r.fresh.p99,
    newConnectionMaxMs: r.fresh.max,
    transportErrors: r.fresh.errors,
    keepAliveReqPerSecond: r.keepAliveRps,
    deepestAcceptQueue: r.deepestQueue,
  })),
  summary: SOCKET_SETS.flatMap((sockets) => {
    const mine = runs.filter((r) => r.sockets === sockets);
    return [
      { label: `new-connection p99, LISTEN_SOCKETS=${sockets}`, unit: 'ms', values: mine.map((r) => r.fresh.p99) },
      { label: `keep-alive throughput, LISTEN_SOCKETS=${sockets}`, unit: 'req/s', values: mine.map((r) => r.keepAliveRps) },
    ];
  }),
});
console.log(report);
