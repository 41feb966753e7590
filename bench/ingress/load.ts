// The ingress benchmarks' load generator and server processes (bench/ingress/run.ts,
// bench/ingress/flags.ts): signed 1 KiB webhooks over keep-alive connections, closed or open loop,
// and servers spawned as child processes so their CPU and peak RSS are their own.
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { repoRoot } from '../../infra/paths.ts';
import { brokerReady, createKafka } from '#plumbing/kafka/client.ts';
import { ensureTopics, topicNames, topicSpecs, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { freePort } from '../lib/bridge.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';

export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100);
export const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 8_000);
export const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 3000);
export const RESOURCE_IDS = 10_000;
export const BODY_BYTES = 1024;

export const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;
export const secret = devEnv.DEMO_SECRET!;

export function signedBody(): { body: Buffer; headers: Record<string, string> } {
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
export const POOL_SIZE = Number(process.env.BENCH_POOL ?? 20_000);
let pool: Array<ReturnType<typeof signedBody>> | undefined;
let poolIndex = 0;

export function request(agent: http.Agent, port: number): Promise<number> {
  pool ??= Array.from({ length: POOL_SIZE }, signedBody);
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

export interface LoadResult {
  requests: number;
  ok: number;
  other: Record<string, number>;
  seconds: number;
  latenciesMs: Float64Array;
}

export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function summarise(result: LoadResult) {
  const sorted = result.latenciesMs.slice().sort();
  return { rps: result.ok / result.seconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99), ...result };
}

/** Closed loop: each connection sends its next request as soon as the previous one is answered. */
export async function closedLoop(port: number, durationMs: number, connections = CONNECTIONS): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  const other: Record<string, number> = {};
  let ok = 0;
  const started = performance.now();
  const end = started + durationMs;
  await Promise.all(
    Array.from({ length: connections }, async () => {
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
export async function fixedRate(port: number, rate: number, durationMs: number): Promise<LoadResult> {
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

export interface Server {
  child: ChildProcess;
  /** The server's stdout (its log lines, and --trace-gc's). */
  logFile: string;
  port: number;
  peakRssMb: () => number;
  /** user + system CPU seconds the server process has used so far. */
  cpuSeconds: () => number;
  stop: () => Promise<void>;
}

let spawned = 0;

/** Starts `file` (a bundle, or a .ts file run through tsx; relative to the repository or absolute). */
export async function startServer(file: string, env: Record<string, string>, nodeFlags: string[], waitReady = false): Promise<Server> {
  const port = await freePort();
  const adminPort = await freePort();
  // Logs go to a file, not a pipe: a pipe the busy load generator drains late would stall the
  // server's synchronous log writes, which is a property of this bench, not of the server.
  spawned += 1;
  const logFile = path.join(tmpdir(), `bench-${path.basename(file, '.ts')}-${process.pid}-${spawned}.log`);
  // A bundle (infra/build/build.ts) runs as it is; a TypeScript file through tsx's loader.
  const loader = file.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...nodeFlags, ...loader, path.resolve(repoRoot, file)], {
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
    logFile,
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

export interface Measured {
  peak: ReturnType<typeof summarise>;
  cpuMsPerRequest: number;
  warmupOk: number;
  rssMb: number;
}

export async function warmUp(name: string, server: Server): Promise<number> {
  console.error(`[bench] ${name}: warm-up ${WARMUP_MS} ms`);
  const ok = (await closedLoop(server.port, WARMUP_MS)).ok;
  console.error(`[bench] ${name}: peak RSS so far (VmHWM) ${server.peakRssMb().toFixed(1)} MB`);
  return ok;
}

export async function measureRound(name: string, server: Server): Promise<Omit<Measured, 'warmupOk'>> {
  console.error(`[bench] ${name}: ${CONNECTIONS} connections for ${DURATION_MS} ms`);
  const cpuBefore = server.cpuSeconds();
  const peak = summarise(await closedLoop(server.port, DURATION_MS));
  const cpuMsPerRequest = ((server.cpuSeconds() - cpuBefore) * 1000) / peak.requests;
  console.error(
    `[bench] ${name}: ${peak.rps.toFixed(0)} req/s, p50 ${peak.p50.toFixed(2)} ms, p99 ${peak.p99.toFixed(2)} ms, peak RSS so far (VmHWM) ${server.peakRssMb().toFixed(1)} MB`,
  );
  return { peak, cpuMsPerRequest, rssMb: server.peakRssMb() };
}

export async function measure(name: string, server: Server): Promise<Measured> {
  const warmupOk = await warmUp(name, server);
  return { ...(await measureRound(name, server)), warmupOk };
}

/**
 * A fresh 12-partition events topic (named after `name` and the time) and the ingress's environment
 * to publish to it; exits when no broker answers. `remove` deletes the topics and disconnects.
 */
export async function benchTopic(name: string, brokers: string[]) {
  if (!(await brokerReady(brokers))) {
    console.error(`no Kafka broker answers at ${brokers.join(',')} (npm run kafka:start, or set KAFKA_BROKERS)`);
    process.exit(1);
  }
  const stamp = `${name}-${Date.now().toString(36)}`;
  const settings: TopicSettings = {
    events: `${stamp}.events`,
    applied: `${stamp}.applied`,
    eventsPartitions: 12,
    retryLevels: 0,
    replicationFactor: 1,
    minInsyncReplicas: 1,
  };
  const kafka = createKafka({ brokers, clientId: name, logger: createLogger({ name: 'bench', level: 'error' }) });
  const admin = kafka.admin();
  await admin.connect();
  await ensureTopics(admin, topicSpecs(settings), 1);
  const ingressEnv = {
    ...devEnv,
    KAFKA_BROKERS: brokers.join(','),
    TOPIC_EVENTS: settings.events,
    WEBHOOK_SOURCES_FILE: 'infra/dev/dev-sources.json',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  };
  const remove = async () => {
    await admin.deleteTopics({ topics: Object.values(topicNames(settings)).flat() }).catch(() => {});
    await admin.disconnect();
  };
  return { admin, settings, ingressEnv, remove };
}
