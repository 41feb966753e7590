// The outbox relay in its own thread: encoding applied records for Kafka (kafkajs builds several
// buffers per record) costs about as much CPU as applying them, and on the worker's event loop it
// delayed every apply transaction behind it. The thread has its own Postgres pool, Kafka client
// and event loop; it talks to the worker only by messages (nudge and stop in, published counts
// and log lines out). Crash points still stop the whole process.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { createKafka } from '#plumbing/kafka/client.ts';
import { topicLayouts } from '#plumbing/kafka/partitioned-send.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import { startTracing, tracingSettingsFromEnv } from '#plumbing/observability/tracing.ts';
import type { CrashPoint } from './crash-points.ts';
import { createCrashPoints } from './crash-points.ts';
import type { WorkerMetrics } from './metrics.ts';
import { createRelayPool, OutboxRelay, relayParts } from './outbox-relay.ts';

/** What the worker needs from a relay, wherever it runs. */
export interface RelayHandle {
  /** False once the relay has died (its thread exited or failed); readiness reports it. */
  readonly running: boolean;
  /** An apply transaction committed: publish without waiting for the next poll. */
  nudge(): void;
  /** Publishes what is in flight, then stops. */
  stop(): Promise<void>;
}

export interface RelayThreadSettings {
  brokers: string[];
  clientId: string;
  databaseUrl: string;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs?: number;
  logLevel: string;
  appliedTopic: string;
  batchSize: number;
  batchBytes: number;
  pollMs: number;
  sendTimeoutMs: number;
  /** How long the thread's stop goes on publishing what was applied (OutboxRelay's stopDrainMs). */
  stopDrainMs: number;
  transactionalId: string;
  crashAt?: CrashPoint;
  crashAfter: number;
  /** Tracing is on in the worker: the thread starts its own SDK from the same OTEL_* variables
   * (a thread has its own module instances; the worker's tracer provider cannot cross). */
  tracing?: boolean;
}

type ToThread = { type: 'nudge' } | { type: 'stop' };
type FromThread =
  { type: 'ready' } | { type: 'failed'; message: string } | { type: 'published'; count: number } | { type: 'log'; line: string };

const THREAD_KIND = 'outbox-relay';

// Set by infra/build/build.ts in a bundle: the relay's own bundle, relative to this module, since a worker
// bundle as the thread's entry would start a second worker in it. Running the sources, the
// thread's entry is this file.
declare const RELAY_THREAD_ENTRY: string | undefined;
function threadEntry(): URL {
  return typeof RELAY_THREAD_ENTRY === 'string' ? new URL(RELAY_THREAD_ENTRY, import.meta.url) : new URL(import.meta.url);
}

/**
 * The relay thread's own V8 heap. Without limits it inherits the worker's young generation and an
 * old generation that grows with its allocation rate (kafkajs allocates several buffers per
 * record), though what it keeps alive is one batch (RELAY_BATCH_SIZE rows). These limits lower the
 * worker's peak RSS at the same throughput (bench:worker with WORKER_RELAY=thread).
 */
export const RELAY_THREAD_LIMITS = { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 64 } as const;

/** Starts the relay thread. Rejects if it cannot connect; `onFatal` gets an error that ends it later. */
export async function startRelayThread(
  settings: RelayThreadSettings,
  deps: { logger: Logger; metrics: WorkerMetrics; onFatal: (error: unknown) => void },
): Promise<RelayHandle> {
  const thread = new Worker(threadEntry(), { workerData: { kind: THREAD_KIND, settings }, resourceLimits: RELAY_THREAD_LIMITS });
  let started = false;
  let stopping = false;
  let dead = false;
  const exited = new Promise<void>((resolve) => thread.once('exit', () => resolve()));
  let resolveReady: () => void;
  let rejectReady: (error: unknown) => void;
  const ready = new Promise<void>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  thread.on('message', (message: FromThread) => {
    if (message.type === 'ready') {
      started = true;
      resolveReady();
    } else if (message.type === 'failed') rejectReady(new Error(`outbox relay thread could not start: ${message.message}`));
    else if (message.type === 'published') deps.metrics.relayPublished.inc(message.count);
    else forwardLog(deps.logger, message.line);
  });
  thread.on('error', (error) => {
    dead = true;
    if (!started) return rejectReady(error);
    deps.logger.error({ err: error }, 'outbox relay thread failed');
    if (!stopping) deps.onFatal(error);
  });
  thread.on('exit', (code) => {
    dead = true;
    if (!started) return rejectReady(new Error(`outbox relay thread exited with code ${code} while starting`));
    if (!stopping) {
      deps.logger.error({ code }, 'outbox relay thread exited');
      deps.onFatal(new Error(`outbox relay thread exited with code ${code}`));
    }
  });
  await ready;
  const post = (message: ToThread) => thread.postMessage(message);
  return {
    get running() {
      return !dead;
    },
    nudge: () => post({ type: 'nudge' }),
    stop: async () => {
      if (stopping) return exited;
      stopping = true;
      post({ type: 'stop' });
      // The thread publishes what was applied (stopDrainMs), finishes its send (bounded by the
      // send timeout) and exits; never wait forever.
      let timer: NodeJS.Timeout | undefined;
      const boundMs = settings.stopDrainMs + settings.sendTimeoutMs + 5_000;
      await Promise.race([exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, boundMs)))]);
      clearTimeout(timer);
      await thread.terminate();
    },
  };
}

/** A log line from the thread, written through the worker's own logger (same destination). */
function forwardLog(logger: Logger, line: string): void {
  try {
    const {
      level,
      msg,
      time: _time,
      pid: _pid,
      hostname: _hostname,
      name: _name,
      service: _service,
      ...fields
    } = JSON.parse(line) as Record<string, unknown>;
    const method = typeof level === 'string' && level in logger ? (level as 'info') : 'info';
    logger[method](fields, typeof msg === 'string' ? msg : '');
  } catch {
    logger.warn({ line }, 'unreadable log line from the outbox relay thread');
  }
}

async function runThread(settings: RelayThreadSettings): Promise<void> {
  const port = parentPort!;
  const send = (message: FromThread) => port.postMessage(message);
  const logger = createLogger({ name: 'worker', level: settings.logLevel }, { write: (line: string) => send({ type: 'log', line }) }).child(
    {
      component: 'outbox-relay',
    },
  );
  const pool = createRelayPool({
    url: settings.databaseUrl,
    statementTimeoutMs: settings.statementTimeoutMs,
    idleInTransactionTimeoutMs: settings.idleInTransactionTimeoutMs,
    logger,
  });
  const kafka = createKafka({ brokers: settings.brokers, clientId: `${settings.clientId}-relay`, logger });
  const parts = relayParts({
    kafka,
    databaseUrl: settings.databaseUrl,
    transactionalId: settings.transactionalId,
    logger,
    sendTimeoutMs: settings.sendTimeoutMs,
  });
  const admin = kafka.admin();
  const tracing = startTracing(settings.tracing === true ? tracingSettingsFromEnv(process.env, 'worker') : undefined);
  try {
    await parts.producer.connect();
    await admin.connect();
  } catch (error) {
    await parts.producer.close();
    send({ type: 'failed', message: (error as Error).message });
    await pool.end().catch(() => {});
    port.close();
    return;
  }
  const relay = new OutboxRelay({
    pool,
    ...parts,
    layout: topicLayouts(admin),
    topic: settings.appliedTopic,
    batchSize: settings.batchSize,
    batchBytes: settings.batchBytes,
    pollMs: settings.pollMs,
    sendTimeoutMs: settings.sendTimeoutMs,
    stopDrainMs: settings.stopDrainMs,
    logger,
    onPublished: (count) => send({ type: 'published', count }),
    crashPoints: createCrashPoints(settings.crashAt, settings.crashAfter),
    tracing,
  });
  relay.start();
  send({ type: 'ready' });
  port.on('message', (message: ToThread) => {
    if (message.type === 'nudge') {
      relay.nudge();
      return;
    }
    void (async () => {
      await relay.stop();
      await tracing.shutdown().catch(() => {});
      await admin.disconnect().catch(() => {});
      await pool.end().catch(() => {});
      port.close();
    })();
  });
}

const data = workerData as { kind?: string; settings?: RelayThreadSettings } | null;
if (!isMainThread && data?.kind === THREAD_KIND && data.settings) await runThread(data.settings);
