// The soak's load: bench/e2e/load.ts's open loop (request i due at start + i / rate and sent then,
// whatever is still in flight; latency counts from the due time), its signed events and its record
// of each request, but streamed over a long run. openLoop signs a whole phase up front and returns
// once every request of it is answered: for 20 minutes at 500 req/s that is 600,000 bodies held at
// once, and a run cut into phases would pause at every boundary. Here a small buffer is signed in
// the gaps between due times, one keep-alive agent serves the whole run, and counters let a sampler
// read the run while it goes.
// What is kept of each request is a few numbers in typed arrays indexed by its sequence number, not
// an object per request in a map: 600,000 of those (and as many for the applied records) made this
// process's heap grow all run long, and its major GCs, longer as the heap grew, stalled the
// generator and the applied topic's reader; the soak charged those stalls to the bridge as latency
// that drifted upward (bench/soak/bookkeeping-gc.ts compares the two forms).
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { untilNextDue, wallNow, type EventFactory, type SignedRequest } from '../e2e/load.ts';

export interface SteadyLoadOptions {
  port: number;
  path: string;
  /** The schedule (rate, length, warm-up), filled in as the requests go. */
  requests: RequestLog;
  /** Builds request i (from 0) with the event id requests.eventIdOf(i). */
  factory: EventFactory;
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

/**
 * Every request of the schedule by index (request i is due at started + i * 1000 / rate), live:
 * answers fill in as they arrive. Request i's event id is `${prefix}${i + 1}`.
 */
export class RequestLog {
  readonly total: number;
  readonly rate: number;
  readonly warmupMs: number;
  readonly prefix = `evt_${randomUUID()}_`;
  /** Wall ms of the first due time; set when the load starts. */
  started = NaN;
  /** HTTP status; 0 until answered, and for a transport error or a timeout. */
  readonly status: Uint16Array;
  /** When the response head arrived, wall ms; NaN until then, and for a transport error. */
  readonly answered: Float64Array;
  /** The transport error's code (ECONNRESET, timeout, ...) of the few requests that got no answer. */
  readonly errors = new Map<number, string>();
  /** Requests sent so far: indices 0 .. sent - 1. */
  sent = 0;

  /** `rate` requests a second for `durationMs`; those due in the first `warmupMs` are the warm-up. */
  constructor(options: { rate: number; durationMs: number; warmupMs?: number }) {
    this.rate = options.rate;
    this.total = Math.max(1, Math.round((options.rate * options.durationMs) / 1000));
    this.warmupMs = options.warmupMs ?? 0;
    this.status = new Uint16Array(this.total);
    this.answered = new Float64Array(this.total).fill(NaN);
  }

  due(i: number): number {
    return this.started + (i * 1000) / this.rate;
  }

  phase(i: number): 'warm-up' | 'soak' {
    return this.due(i) < this.started + this.warmupMs ? 'warm-up' : 'soak';
  }

  accepted(i: number): boolean {
    return this.status[i]! >= 200 && this.status[i]! < 300;
  }

  eventIdOf(i: number): string {
    return `${this.prefix}${i + 1}`;
  }

  /** The index of one of this run's event ids; undefined for any other id. */
  indexOf(eventId: string): number | undefined {
    if (!eventId.startsWith(this.prefix)) return undefined;
    const digits = eventId.slice(this.prefix.length);
    if (!/^[1-9][0-9]*$/.test(digits)) return undefined;
    const i = Number(digits) - 1;
    return i < this.sent ? i : undefined;
  }
}

export interface SteadyLoad {
  /** Wall ms of the first due time. */
  started: number;
  requests: RequestLog;
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
  const { port, requests, factory } = options;
  const { rate, total } = requests;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
  const counters: LoadCounters = { sent: 0, answered: 0, accepted: 0, rejected: 0 };
  let sendLags: number[] = [];
  let inFlight = 0;
  let sending = true;
  let resolveAnswered!: () => void;
  const allAnswered = new Promise<void>((resolve) => (resolveAnswered = resolve));
  const signed: SignedRequest[] = [];
  const signAhead = Math.max(1, Math.ceil((rate * SIGN_AHEAD_MS) / 1000));
  while (signed.length < signAhead) signed.push(factory.next());
  const started = wallNow() + 50;
  requests.started = started;

  const settle = (i: number) => {
    counters.answered += 1;
    if (requests.accepted(i)) counters.accepted += 1;
    else counters.rejected += 1;
    inFlight -= 1;
    if (!sending && inFlight === 0) resolveAnswered();
  };
  const fire = (i: number, due: number) => {
    const request = signed.shift() ?? factory.next();
    requests.sent = i + 1;
    counters.sent += 1;
    inFlight += 1;
    sendLags.push(wallNow() - due);
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      settle(i);
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
        requests.answered[i] = wallNow();
        requests.status[i] = res.statusCode ?? 0;
        res.resume();
        res.on('end', done);
        res.on('error', done);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) => {
      requests.status[i] = 0;
      requests.answered[i] = NaN;
      requests.errors.set(i, error.code ?? error.message);
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
        fire(i, due);
        lastDue = due;
        i += 1;
      }
      if (i >= total) break;
      const next = started + (i * 1000) / rate;
      // Sign ahead in the gap, leaving a millisecond before the next due time.
      while (signed.length < signAhead && wallNow() < next - 1) signed.push(factory.next());
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
    requests,
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
