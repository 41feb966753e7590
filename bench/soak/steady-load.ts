// The soak's load: bench/e2e/load.ts's open loop (request i due at start + i / rate and sent then,
// whatever is still in flight; latency counts from the due time), its signed events and its record
// of each request, but streamed over a long run. openLoop signs a whole phase up front and returns
// once every request of it is answered: for 20 minutes at 500 req/s that is 600,000 bodies held at
// once, and a run cut into phases would pause at every boundary. Here a small buffer is signed in
// the gaps between due times, one keep-alive agent serves the whole run, and counters let a sampler
// read the run while it goes.
import http from 'node:http';
import { untilNextDue, wallNow, type EventFactory, type Sent, type SignedRequest } from '../e2e/load.ts';

export interface SteadyLoadOptions {
  port: number;
  path: string;
  rate: number;
  durationMs: number;
  factory: EventFactory;
  /** Requests due in the first `warmupMs` are labelled `warm-up`, later ones `soak`. */
  warmupMs?: number;
  /** Per request; an unanswered request counts as status 0. */
  timeoutMs?: number;
}

/** Counts since the start of the run; a sampler takes differences. */
export interface LoadCounters {
  sent: number;
  answered: number;
  accepted: number;
  rejected: number;
}

export interface SteadyLoad {
  /** Wall ms of the first due time. */
  started: number;
  /** Every request so far by event id, live (answers fill in as they arrive). */
  byEventId: Map<string, Sent>;
  counters: LoadCounters;
  /** How late each request since the last call was sent (send time - due time), ms; empties the list. */
  takeSendLags(): number[];
  /** Resolves when the last request is due and sent (not answered): the load stops then. */
  sendingDone: Promise<{ lastDue: number; lastSent: number }>;
  /** Resolves when every request is answered (or timed out). */
  allAnswered: Promise<void>;
}

// Signed ahead by up to 200 ms of the rate: enough that a due request never waits for its HMAC,
// small enough to keep the memory flat.
const SIGN_AHEAD_MS = 200;

export function steadyLoad(options: SteadyLoadOptions): SteadyLoad {
  const { port, rate, durationMs } = options;
  const total = Math.max(1, Math.round((rate * durationMs) / 1000));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
  const byEventId = new Map<string, Sent>();
  const counters: LoadCounters = { sent: 0, answered: 0, accepted: 0, rejected: 0 };
  let sendLags: number[] = [];
  let inFlight = 0;
  let sending = true;
  let resolveAnswered!: () => void;
  const allAnswered = new Promise<void>((resolve) => (resolveAnswered = resolve));
  const signed: SignedRequest[] = [];
  const signAhead = Math.max(1, Math.ceil((rate * SIGN_AHEAD_MS) / 1000));
  while (signed.length < signAhead) signed.push(options.factory.next());
  const started = wallNow() + 50;
  const warmupEndsAt = started + (options.warmupMs ?? 0);

  const settle = (entry: Sent) => {
    counters.answered += 1;
    if (entry.status >= 200 && entry.status < 300) counters.accepted += 1;
    else counters.rejected += 1;
    inFlight -= 1;
    if (!sending && inFlight === 0) resolveAnswered();
  };
  const fire = (due: number) => {
    const request = signed.shift() ?? options.factory.next();
    const entry: Sent = { eventId: request.eventId, phase: due < warmupEndsAt ? 'warm-up' : 'soak', due, status: 0 };
    byEventId.set(request.eventId, entry);
    counters.sent += 1;
    inFlight += 1;
    sendLags.push(wallNow() - due);
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      settle(entry);
    };
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
        res.on('end', done);
        res.on('error', done);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) => {
      entry.status = 0;
      entry.error = error.code ?? error.message;
      delete entry.answered;
      done();
    });
    req.end(request.body);
  };

  const sendingDone = (async () => {
    let i = 0;
    let lastDue = started;
    while (i < total) {
      const now = wallNow();
      for (let due = started + (i * 1000) / rate; i < total && due <= now; due = started + (i * 1000) / rate) {
        fire(due);
        lastDue = due;
        i += 1;
      }
      if (i >= total) break;
      const next = started + (i * 1000) / rate;
      // Sign ahead in the gap, leaving a millisecond before the next due time.
      while (signed.length < signAhead && wallNow() < next - 1) signed.push(options.factory.next());
      const wait = next - wallNow();
      await untilNextDue(wait);
    }
    const lastSent = wallNow();
    sending = false;
    if (inFlight === 0) resolveAnswered();
    void allAnswered.then(() => agent.destroy());
    return { lastDue, lastSent };
  })();

  return {
    started,
    byEventId,
    counters,
    takeSendLags: () => {
      const lags = sendLags;
      sendLags = [];
      return lags;
    },
    sendingDone,
    allAnswered,
  };
}
