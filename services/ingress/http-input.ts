import type { IncomingMessage } from 'node:http';

/** ok is false when the header was repeated; value is then undefined. */
export interface HeaderResult {
  ok: boolean;
  value: string | undefined;
}

/**
 * node:http joins repeated headers with ", ", which would let `a, b` pass as one value;
 * headersDistinct keeps every occurrence so a repeat is refused instead of guessed at.
 */
export function singleHeader(req: IncomingMessage, name: string): HeaderResult {
  const values = req.headersDistinct[name];
  if (values === undefined || values.length === 0) return { ok: true, value: undefined };
  if (values.length > 1) return { ok: false, value: undefined };
  return { ok: true, value: values[0] };
}

const JSON_MEDIA_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

/** application/json, optionally with charset=utf-8; any other parameter or charset is refused. */
export function isJsonContentType(req: IncomingMessage): boolean {
  const values = req.headersDistinct['content-type'];
  return values !== undefined && values.length === 1 && JSON_MEDIA_TYPE.test(values[0]!.trim());
}

export type BodyResult = { kind: 'ok'; body: Buffer } | { kind: 'too_large' } | { kind: 'aborted' };

interface BodyReader {
  chunks: Buffer[];
  size: number;
  limitBytes: number;
  resolve: (result: BodyResult) => void;
}

// The reader's state hangs off the request and the listeners are module-level functions (their
// `this` is the request): no closures per request. tsx compiles with esbuild's keepNames, which
// wraps every closure assigned to a name in a defineProperty call, a measurable cost at
// thousands of requests per second.
const READER = Symbol('rawBodyReader');
type ReadingRequest = IncomingMessage & { [READER]?: BodyReader | undefined };

function finishReading(req: ReadingRequest, result: BodyResult): void {
  const reader = req[READER];
  if (reader === undefined) return;
  req[READER] = undefined;
  req.off('data', onBodyData);
  req.off('end', onBodyEnd);
  req.off('error', onBodyError);
  req.off('close', onBodyClose);
  reader.resolve(result);
}

function onBodyData(this: ReadingRequest, chunk: Buffer): void {
  const reader = this[READER];
  if (reader === undefined) return;
  reader.size += chunk.length;
  if (reader.size > reader.limitBytes) {
    finishReading(this, { kind: 'too_large' });
    return;
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
  finishReading(this, { kind: 'aborted' });
}

function onBodyClose(this: ReadingRequest): void {
  if (!this.complete) finishReading(this, { kind: 'aborted' });
}

/** Reads the raw bytes (never a parsed-and-reserialised body) and stops at the limit. */
export function readRawBody(req: IncomingMessage, limitBytes: number): Promise<BodyResult> {
  return new Promise((resolve) => {
    const reading = req as ReadingRequest;
    reading[READER] = { chunks: [], size: 0, limitBytes, resolve };
    reading.on('data', onBodyData);
    reading.on('end', onBodyEnd);
    reading.on('error', onBodyError);
    reading.on('close', onBodyClose);
  });
}
