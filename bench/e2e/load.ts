// The load of bench/e2e: signed ~1 KiB theme events sent at a fixed rate, open loop. Request i of
// a phase is due at start + i / rate and is sent then whether or not earlier requests have been
// answered (an http.Agent with room for many sockets; past that the agent queues, and the wait
// still counts); every latency counts from the due time, so a stall of the server cannot hide.
import http from 'node:http';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';

export const BODY_BYTES = 1024;

/** Wall-clock milliseconds with sub-millisecond resolution (monotonic within the run). */
export const wallNow = (): number => performance.timeOrigin + performance.now();

/**
 * Sleeps until the next request is due, never less than one timer tick (~1 ms): the requests that
 * fell due meanwhile go out together, up to a millisecond late, and that lateness counts in every
 * latency (they count from the due time). Waiting with setImmediate for a gap under 1 ms instead
 * spun the generator's event loop, burning CPU that the services under test share on this machine.
 */
export const untilNextDue = (waitMs: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.floor(waitMs))));

export interface SignedRequest {
  eventId: string;
  body: Buffer;
  headers: Record<string, string>;
}

export interface EventFactory {
  /** A fresh event: unique id, round-robin resource id, a version above every earlier one. */
  next(): SignedRequest;
}

/**
 * Every event of the run gets a version above every earlier one (a run-wide counter), and the
 * resource ids go round robin over `resources`: with more ids than events in the run, no id repeats
 * and every accepted event must apply. (With fewer, two events of one resource may be in flight at
 * once behind a stall and the later version may land first; the earlier one is then, rightly,
 * stale, and has no applied record.)
 */
export function eventFactory(secret: string, resources: number, options: { eventIdPrefix?: string } = {}): EventFactory {
  let seq = 0;
  return {
    next() {
      seq += 1;
      // With a prefix, the event id is the prefix and the sequence number (from 1): the soak finds a
      // record's request by parsing it, without a map of every event id it sent.
      const eventId = options.eventIdPrefix === undefined ? {} : { event_id: `${options.eventIdPrefix}${seq}` };
      const event = sampleThemeEvent({ ...eventId, resource: { id: `theme_e2e_${seq % resources}`, version: seq } });
      const data = event.data as { name: string };
      const size = Buffer.byteLength(JSON.stringify(event));
      data.name = `${data.name} ${'x'.repeat(Math.max(0, BODY_BYTES - size - 1))}`;
      const body = Buffer.from(JSON.stringify(event));
      const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id: event.event_id });
      return { eventId: event.event_id, body, headers: { ...headers, 'content-length': String(body.length) } };
    },
  };
}

export interface Sent {
  eventId: string;
  phase: string;
  /** When the request was due (wall ms). */
  due: number;
  /** When the response head arrived (wall ms); undefined for a transport error. */
  answered?: number;
  /** HTTP status; 0 for a transport error or a timeout. */
  status: number;
  /** The transport error's code (ECONNRESET, timeout, ...) when status is 0. */
  error?: string;
  /** Sent on a keep-alive socket of an earlier request (false: on a connection opened for it). */
  reusedSocket?: boolean;
  /** When its new connection was established (wall ms); only when not reused. */
  connected?: number;
  /** When the request's last byte was handed to the kernel (wall ms). */
  written?: number;
}

export interface PhaseResult {
  sent: Sent[];
  /** Wall ms of the first due time and of the last answer. */
  started: number;
  ended: number;
  /** How late the generator sent its requests (send time - due time), p99 and max, ms. */
  sendLagP99Ms: number;
  sendLagMaxMs: number;
}

export interface OpenLoopOptions {
  port: number;
  path: string;
  rate: number;
  durationMs: number;
  phase: string;
  factory: EventFactory;
  /** Per request; an unanswered request counts as status 0. */
  timeoutMs?: number;
  onSent?: (sent: Sent) => void;
}

/** Signs the phase's requests first (so HMACs do not delay the schedule), then sends them on time. */
export async function openLoop(options: OpenLoopOptions): Promise<PhaseResult> {
  const { port, rate, durationMs, phase } = options;
  const total = Math.max(1, Math.round((rate * durationMs) / 1000));
  const requests = Array.from({ length: total }, () => options.factory.next());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
  const sent: Sent[] = [];
  const lags = new Float64Array(total);
  const pending: Array<Promise<void>> = [];
  const started = wallNow() + 20;
  const fire = (i: number, due: number) => {
    const request = requests[i]!;
    const entry: Sent = { eventId: request.eventId, phase, due, status: 0 };
    sent.push(entry);
    options.onSent?.(entry);
    lags[i] = wallNow() - due;
    pending.push(
      new Promise<void>((resolve) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: options.path,
            agent,
            headers: request.headers,
            timeout: options.timeoutMs ?? 30_000,
          },
          (res) => {
            entry.answered = wallNow();
            entry.status = res.statusCode ?? 0;
            res.resume();
            res.on('end', resolve);
            res.on('error', () => resolve());
          },
        );
        req.on('socket', (socket) => {
          entry.reusedSocket = req.reusedSocket;
          if (!req.reusedSocket) socket.once('connect', () => (entry.connected = wallNow()));
        });
        req.on('finish', () => (entry.written = wallNow()));
        req.on('timeout', () => req.destroy(new Error('timeout')));
        req.on('error', (error: NodeJS.ErrnoException) => {
          entry.status = 0;
          entry.error = error.code ?? error.message;
          delete entry.answered;
          resolve();
        });
        req.end(request.body);
      }),
    );
  };
  let i = 0;
  while (i < total) {
    const now = wallNow();
    for (let due = started + (i * 1000) / rate; i < total && due <= now; due = started + (i * 1000) / rate) {
      fire(i, due);
      i += 1;
    }
    if (i < total) {
      const wait = started + (i * 1000) / rate - wallNow();
      await untilNextDue(wait);
    }
  }
  await Promise.all(pending);
  agent.destroy();
  const sortedLags = lags.sort();
  return {
    sent,
    started,
    ended: wallNow(),
    sendLagP99Ms: sortedLags[Math.floor(0.99 * (total - 1))]!,
    sendLagMaxMs: sortedLags[total - 1]!,
  };
}
