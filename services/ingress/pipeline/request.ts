// A request as the pipeline steps see it: its headers as plain lists, and how reading its body
// ended. node:http's objects stay with the handler and http-input.ts, which read the request.

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
  if (values === undefined || values.length === 0) return ABSENT;
  if (values.length > 1) return REPEATED;
  return { ok: true, value: values[0] };
}

// Shared answers for the cases without a value: preflight asks for a dozen headers per request.
const ABSENT: HeaderResult = Object.freeze({ ok: true, value: undefined });
const REPEATED: HeaderResult = Object.freeze({ ok: false, value: undefined });

const JSON_MEDIA_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

/** application/json, optionally with charset=utf-8; any other parameter or charset is refused. */
export function isJsonContentType(headers: RequestHeaders): boolean {
  const values = headers['content-type'];
  return values !== undefined && values.length === 1 && JSON_MEDIA_TYPE.test(values[0]!.trim());
}

/** How reading the body ended (readRawBody in http-input.ts): the bytes, or why there are none. */
export type BodyResult =
  | { kind: 'ok'; body: Buffer }
  | { kind: 'too_large' }
  | { kind: 'over_budget' }
  | { kind: 'client_over_budget' }
  | { kind: 'idle_timeout' }
  | { kind: 'timeout' }
  | { kind: 'aborted' };
