import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { BodyResult } from './pipeline/request.ts';

/**
 * Body bytes buffered at once (read, verified or waiting for their ack), across all requests and
 * per client address. A request takes bytes as they arrive, never what it merely declares: a
 * Content-Length costs nothing until the body is sent, so sockets that declare 1 MiB and send
 * nothing hold no budget. The bytes are given back when the request is done (releaseBody). What
 * does not fit is refused (over_budget, client_over_budget) instead of read.
 */
export class BodyBudget {
  readonly limitBytes: number;
  /** What one client address (an IPv4 address, an IPv6 /64) may hold at once. */
  readonly perClientLimitBytes: number;
  usedBytes = 0;
  /** Bytes held by each client address that holds any. */
  readonly byClient = new Map<string, number>();
  constructor(limitBytes: number, perClientLimitBytes: number = limitBytes) {
    this.limitBytes = limitBytes;
    this.perClientLimitBytes = perClientLimitBytes;
  }
}

/** A body that gets no byte for idleMs, or is not complete after totalMs, is cut off. */
export interface BodyDeadlines {
  idleMs: number;
  totalMs: number;
}

/**
 * The key a client's share of the budget is kept under: its IPv4 address, or its IPv6 /64 (one
 * host usually owns a whole /64, so per-address keys there would cost an attacker nothing).
 */
export function clientKey(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  if (address.startsWith('::ffff:') && address.includes('.')) return address.slice(7);
  if (!address.includes(':')) return address;
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => (g === '' ? '0' : g.toLowerCase().replace(/^0+(?=.)/, '')))
    .join(':')}::/64`;
}

/** What becomes of a connection just accepted: kept, let in only to be refused, or closed at once. */
export type ConnectionAdmission = 'admitted' | 'refused' | 'closed';

// The share a connection counts against, and whether it is one of the client's own or a refusal.
const SHARE_CLIENT = Symbol('shareClient');
const SHARE_REFUSED = Symbol('shareRefused');
type SharedSocket = Socket & { [SHARE_CLIENT]?: ClientConnections; [SHARE_REFUSED]?: boolean };

interface ClientConnections {
  key: string;
  open: number;
  refusing: number;
  share: ConnectionShare;
}

/**
 * Open connections per client address, keyed as the body budget is (clientKey): one address
 * that holds every keep-alive socket it can takes its share, not the whole listener. Past the
 * share a connection is let in only to be answered 429 (a provider's HTTP client reports an answer
 * and its Retry-After, not a reset); a client already waiting for refusals past refusalsPerClient
 * has further connections closed at accept, so refusals cannot hold the slots the share protects.
 * Each counts until the socket closes.
 */
export class ConnectionShare {
  readonly perClientLimit: number;
  readonly refusalsPerClient: number;
  readonly byClient = new Map<string, ClientConnections>();
  constructor(perClientLimit: number, refusalsPerClient: number) {
    this.perClientLimit = perClientLimit;
    this.refusalsPerClient = refusalsPerClient;
  }

  admit(socket: Socket): ConnectionAdmission {
    const key = clientKey(socket.remoteAddress);
    let client = this.byClient.get(key);
    if (client === undefined) {
      client = { key, open: 0, refusing: 0, share: this };
      this.byClient.set(key, client);
    }
    const shared = socket as SharedSocket;
    if (client.open < this.perClientLimit) {
      client.open += 1;
    } else if (client.refusing < this.refusalsPerClient) {
      client.refusing += 1;
      shared[SHARE_REFUSED] = true;
    } else {
      if (client.open === 0 && client.refusing === 0) this.byClient.delete(key);
      return 'closed';
    }
    shared[SHARE_CLIENT] = client;
    socket.once('close', onSharedSocketClose);
    return shared[SHARE_REFUSED] === true ? 'refused' : 'admitted';
  }

  /** The connection was let in past its client's share: whatever it asks is answered 429. */
  static refused(socket: Socket): boolean {
    return (socket as SharedSocket)[SHARE_REFUSED] === true;
  }
}

function onSharedSocketClose(this: SharedSocket): void {
  const client = this[SHARE_CLIENT];
  if (client === undefined) return;
  this[SHARE_CLIENT] = undefined;
  if (this[SHARE_REFUSED] === true) client.refusing -= 1;
  else client.open -= 1;
  if (client.open === 0 && client.refusing === 0) client.share.byClient.delete(client.key);
}

interface BodyReader {
  chunks: Buffer[];
  size: number;
  limitBytes: number;
  budget: BodyBudget | undefined;
  client: string;
  deadlines: BodyDeadlines | undefined;
  /** performance.now() when the read began. */
  startedAt: number;
  timer: NodeJS.Timeout | undefined;
  resolve: (result: BodyResult) => void;
}

// The reader's state hangs off the request and the listeners are module-level functions (their
// `this` is the request): no closures per request. tsx compiles with esbuild's keepNames, which
// wraps every closure assigned to a name in a defineProperty call, a measurable cost at
// thousands of requests per second.
const READER = Symbol('rawBodyReader');
// Bytes of the budget this request holds, and the client they count against; given back by releaseBody.
const HELD = Symbol('heldBodyBytes');
const CLIENT = Symbol('bodyClient');
type ReadingRequest = IncomingMessage & { [READER]?: BodyReader | undefined; [HELD]?: number; [CLIENT]?: string };

const OVER_BUDGET: BodyResult = { kind: 'over_budget' };
const CLIENT_OVER_BUDGET: BodyResult = { kind: 'client_over_budget' };
const TOO_LARGE: BodyResult = { kind: 'too_large' };
const IDLE_TIMEOUT: BodyResult = { kind: 'idle_timeout' };
const TIMEOUT: BodyResult = { kind: 'timeout' };
const ABORTED: BodyResult = { kind: 'aborted' };

function finishReading(req: ReadingRequest, result: BodyResult): void {
  const reader = req[READER];
  if (reader === undefined) return;
  req[READER] = undefined;
  if (reader.timer !== undefined) clearTimeout(reader.timer);
  req.off('data', onBodyData);
  req.off('end', onBodyEnd);
  req.off('error', onBodyError);
  req.off('close', onBodyClose);
  // A body that is not kept gives its bytes back at once.
  if (result.kind !== 'ok' && reader.budget !== undefined) releaseBody(req, reader.budget);
  reader.resolve(result);
}

function onBodyData(this: ReadingRequest, chunk: Buffer): void {
  const reader = this[READER];
  if (reader === undefined) return;
  const deadlines = reader.deadlines;
  if (deadlines !== undefined) {
    // A trickle that keeps the idle timer from firing still runs into the total deadline here.
    if (performance.now() - reader.startedAt > deadlines.totalMs) {
      finishReading(this, TIMEOUT);
      return;
    }
    reader.timer?.refresh();
  }
  reader.size += chunk.length;
  if (reader.size > reader.limitBytes) {
    finishReading(this, TOO_LARGE);
    return;
  }
  const budget = reader.budget;
  if (budget !== undefined) {
    const more = chunk.length;
    if (budget.usedBytes + more > budget.limitBytes) {
      finishReading(this, OVER_BUDGET);
      return;
    }
    const clientHeld = budget.byClient.get(reader.client) ?? 0;
    if (clientHeld + more > budget.perClientLimitBytes) {
      finishReading(this, CLIENT_OVER_BUDGET);
      return;
    }
    budget.usedBytes += more;
    budget.byClient.set(reader.client, clientHeld + more);
    this[HELD] = (this[HELD] ?? 0) + more;
  }
  reader.chunks.push(chunk);
}

function onBodyEnd(this: ReadingRequest): void {
  const reader = this[READER];
  if (reader === undefined) return;
  const { chunks, size } = reader;
  finishReading(this, { kind: 'ok', body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) });
}

function onBodyError(this: ReadingRequest): void {
  finishReading(this, ABORTED);
}

function onBodyClose(this: ReadingRequest): void {
  if (!this.complete) finishReading(this, ABORTED);
}

function onBodyDeadline(req: ReadingRequest): void {
  const reader = req[READER];
  if (reader === undefined) return;
  const overall = performance.now() - reader.startedAt >= reader.deadlines!.totalMs;
  finishReading(req, overall ? TIMEOUT : IDLE_TIMEOUT);
}

/**
 * Reads the raw bytes (never a parsed-and-reserialised body) and stops at the limit. With a
 * budget, each chunk is taken from it as it arrives (globally and for the client's address), or
 * the answer is over_budget / client_over_budget; call releaseBody when the request is done. With
 * deadlines, a body that gets no byte for idleMs (idle_timeout) or is not in after totalMs
 * (timeout) is given up.
 */
export function readRawBody(req: IncomingMessage, limitBytes: number, budget?: BodyBudget, deadlines?: BodyDeadlines): Promise<BodyResult> {
  const reading = req as ReadingRequest;
  const client = budget === undefined ? '' : clientKey(req.socket.remoteAddress);
  if (budget !== undefined) {
    reading[HELD] = 0;
    reading[CLIENT] = client;
  }
  return new Promise((resolve) => {
    const reader: BodyReader = {
      chunks: [],
      size: 0,
      limitBytes,
      budget,
      client,
      deadlines,
      startedAt: performance.now(),
      timer: undefined,
      resolve,
    };
    reading[READER] = reader;
    reading.on('data', onBodyData);
    reading.on('end', onBodyEnd);
    reading.on('error', onBodyError);
    reading.on('close', onBodyClose);
    // One timer per body, refreshed by each chunk: it fires after idleMs of silence, or at the
    // total deadline if that comes first (a trickle is caught in onBodyData).
    if (deadlines !== undefined && !req.complete) {
      reader.timer = setTimeout(onBodyDeadline, Math.min(deadlines.idleMs, deadlines.totalMs), reading);
    }
  });
}

/** Gives the request's body bytes back to the budget it read them under (idempotent). */
export function releaseBody(req: IncomingMessage, budget: BodyBudget): void {
  const reading = req as ReadingRequest;
  const held = reading[HELD];
  if (held === undefined || held === 0) return;
  budget.usedBytes -= held;
  const client = reading[CLIENT]!;
  const left = (budget.byClient.get(client) ?? 0) - held;
  if (left > 0) budget.byClient.set(client, left);
  else budget.byClient.delete(client);
  reading[HELD] = 0;
}
