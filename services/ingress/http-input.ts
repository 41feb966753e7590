import type { IncomingMessage } from 'node:http';

/** A request's headers as node:http's headersDistinct gives them: lower-case names, every occurrence kept. */
export type RequestHeaders = Readonly<Record<string, readonly string[] | undefined>>;

/** ok is false when the header was repeated; value is then undefined. */
export interface HeaderResult {
  ok: boolean;
  value: string | undefined;
}

/**
 * node:http joins repeated headers with ", ", which would let `a, b` pass as one value;
 * headersDistinct keeps every occurrence so a repeat is refused instead of guessed at.
 */
export function singleHeader(headers: RequestHeaders, name: string): HeaderResult {
  const values = headers[name];
  if (values === undefined || values.length === 0) return { ok: true, value: undefined };
  if (values.length > 1) return { ok: false, value: undefined };
  return { ok: true, value: values[0] };
}

const JSON_MEDIA_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

/** application/json, optionally with charset=utf-8; any other parameter or charset is refused. */
export function isJsonContentType(headers: RequestHeaders): boolean {
  const values = headers['content-type'];
  return values !== undefined && values.length === 1 && JSON_MEDIA_TYPE.test(values[0]!.trim());
}

export type BodyResult = { kind: 'ok'; body: Buffer } | { kind: 'too_large' } | { kind: 'over_budget' } | { kind: 'aborted' };

/**
 * Body bytes buffered across all requests at once (read, verified or waiting for their ack). A
 * request takes its declared length before anything of its body is read, a body of unknown
 * length (chunked) takes each chunk as it arrives, and the bytes are given back when the request
 * is done (releaseBody). What does not fit is refused (over_budget) instead of read.
 */
export class BodyBudget {
  readonly limitBytes: number;
  usedBytes = 0;
  constructor(limitBytes: number) {
    this.limitBytes = limitBytes;
  }
}

interface BodyReader {
  chunks: Buffer[];
  size: number;
  limitBytes: number;
  budget: BodyBudget | undefined;
  resolve: (result: BodyResult) => void;
}

// The reader's state hangs off the request and the listeners are module-level functions (their
// `this` is the request): no closures per request. tsx compiles with esbuild's keepNames, which
// wraps every closure assigned to a name in a defineProperty call, a measurable cost at
// thousands of requests per second.
const READER = Symbol('rawBodyReader');
// Bytes of the budget this request holds, given back by releaseBody.
const HELD = Symbol('heldBodyBytes');
type ReadingRequest = IncomingMessage & { [READER]?: BodyReader | undefined; [HELD]?: number };

const OVER_BUDGET: BodyResult = { kind: 'over_budget' };
const TOO_LARGE: BodyResult = { kind: 'too_large' };
const ABORTED: BodyResult = { kind: 'aborted' };

function finishReading(req: ReadingRequest, result: BodyResult): void {
  const reader = req[READER];
  if (reader === undefined) return;
  req[READER] = undefined;
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
  reader.size += chunk.length;
  if (reader.size > reader.limitBytes) {
    finishReading(this, TOO_LARGE);
    return;
  }
  const budget = reader.budget;
  if (budget !== undefined) {
    const held = this[HELD] ?? 0;
    if (reader.size > held) {
      // Only a body of unknown length grows past what it took up front.
      const more = reader.size - held;
      if (budget.usedBytes + more > budget.limitBytes) {
        finishReading(this, OVER_BUDGET);
        return;
      }
      budget.usedBytes += more;
      this[HELD] = reader.size;
    }
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

/**
 * Reads the raw bytes (never a parsed-and-reserialised body) and stops at the limit. With a
 * budget, `declaredBytes` (the Content-Length, at most the limit) is taken from it before anything
 * is read, or the answer is over_budget at once; call releaseBody when the request is done.
 */
export function readRawBody(req: IncomingMessage, limitBytes: number, budget?: BodyBudget, declaredBytes = 0): Promise<BodyResult> {
  const reading = req as ReadingRequest;
  if (budget !== undefined) {
    const declared = declaredBytes > 0 ? declaredBytes : 0;
    if (budget.usedBytes + declared > budget.limitBytes) return Promise.resolve(OVER_BUDGET);
    budget.usedBytes += declared;
    reading[HELD] = declared;
  }
  return new Promise((resolve) => {
    reading[READER] = { chunks: [], size: 0, limitBytes, budget, resolve };
    reading.on('data', onBodyData);
    reading.on('end', onBodyEnd);
    reading.on('error', onBodyError);
    reading.on('close', onBodyClose);
  });
}

/** Gives the request's body bytes back to the budget it read them under (idempotent). */
export function releaseBody(req: IncomingMessage, budget: BodyBudget): void {
  const reading = req as ReadingRequest;
  const held = reading[HELD];
  if (held === undefined || held === 0) return;
  budget.usedBytes -= held;
  reading[HELD] = 0;
}
