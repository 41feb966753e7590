import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import type { ReconcileSettings } from '#domain/sources/index.ts';
import { expandUrlTemplate, type ResourceRefValues } from './url-template.ts';

/**
 * What the provider's API said about one resource. `gone` is a 404 or 410; its `version` is set
 * only when the answer's body states the version of the deletion (the provider's own number).
 */
export type ProviderAnswer =
  | {
      kind: 'snapshot';
      status: number;
      url: string;
      /** Absent only when the body states none: a type ordered by occurred_at needs none. */
      version?: number;
      data: Record<string, unknown>;
      stated?: StatedIdentity;
      time?: StatedTime;
    }
  | { kind: 'gone'; status: number; url: string; version?: number; stated?: StatedIdentity; time?: StatedTime };

/**
 * The time the answer states for the resource's state: top-level `occurred_at` (the envelope's
 * name), else `updated_at` (a REST API's usual one). The value as sent (a non-string as its JSON):
 * the reconciler checks it, as it orders a pull on a type ordered by occurred_at.
 */
export interface StatedTime {
  field: 'occurred_at' | 'updated_at';
  value: string;
}

/**
 * Which resource the answer's body says it is about, where it says so: `tenant_id`, `resource.type`
 * and `resource.id` (the envelope's names), or `type` and `id` at the top level. A value that is not
 * a string (a number is read as its digits) is kept as its JSON, so it can never equal what was asked.
 */
export interface StatedIdentity {
  tenantId?: string;
  type?: string[];
  id?: string[];
}

/** The most an answer may hold, decompressed: the ingress's body limit. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * One GET for a resource's current snapshot. 200 with `{ "version": n, "data": {...} }` (or the
 * envelope's shape, `resource.version`; with `occurred_at` or `updated_at` for a type ordered by
 * time, where the version may be absent) is a snapshot; 404 and 410 mean the API does not have it.
 * A timeout, a network error, 408, 429 and any 5xx are transient (retryable); any other answer,
 * and a body over MAX_BODY_BYTES once decompressed, is a permanent `reconcile_bad_response`.
 */
export async function fetchSnapshot(settings: ReconcileSettings, ref: ResourceRefValues): Promise<ProviderAnswer> {
  let target;
  try {
    target = expandUrlTemplate(settings.url, ref);
  } catch (error) {
    throw new BridgeError('reconcile_bad_response', (error as Error).message, { retryable: false });
  }
  const { url } = target;
  const headers: Record<string, string> = { accept: 'application/json', 'accept-encoding': 'gzip, deflate, br' };
  if (settings.auth) headers[settings.auth.header.toLowerCase()] = settings.auth.value;
  // The timeout covers the body too: a provider that answers the head and then stalls is as slow.
  const signal = AbortSignal.timeout(settings.timeoutMs);
  let status: number;
  let body: Buffer;
  try {
    const response = await get(target, headers, signal);
    status = response.statusCode ?? 0;
    body = await readLimited(response, signal, url);
  } catch (error) {
    if (error instanceof BridgeError) throw error;
    const name = (error as Error).name;
    if (name === 'TimeoutError' || name === 'AbortError' || signal.aborted) {
      throw new BridgeError('reconcile_timeout', `GET ${url}: no answer within ${settings.timeoutMs} ms`, {
        retryable: true,
        cause: error,
      });
    }
    throw new BridgeError('reconcile_unavailable', `GET ${url}: ${(error as Error).message}`, { retryable: true, cause: error });
  }
  if (status === 404 || status === 410) {
    const parsed = parseJsonObject(body);
    const version = parsed === undefined ? undefined : goneVersion(parsed);
    const time = statedTime(parsed);
    return {
      kind: 'gone',
      status,
      url,
      ...(version === undefined ? {} : { version }),
      stated: statedIdentity(parsed),
      ...(time === undefined ? {} : { time }),
    };
  }
  if (status >= 500 || status === 408 || status === 429) {
    throw new BridgeError('reconcile_unavailable', `GET ${url}: HTTP ${status}`, { retryable: true });
  }
  if (status !== 200) throw new BridgeError('reconcile_bad_response', `GET ${url}: HTTP ${status}`, { retryable: false });
  return { kind: 'snapshot', status, url, ...parseSnapshotBody(body.toString('utf8'), url) };
}

function get(target: ReturnType<typeof expandUrlTemplate>, headers: Record<string, string>, signal: AbortSignal): Promise<IncomingMessage> {
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    // `path` goes on the request line exactly as built: no dot-segment removal. No shared agent:
    // pulls are rare, and a kept-alive socket would hold a CLI run open after its answer.
    const request = client.request(
      {
        method: 'GET',
        hostname: target.hostname.replace(/^\[|\]$/g, ''),
        port: target.port,
        path: target.path,
        headers,
        signal,
        agent: false,
      },
      resolve,
    );
    request.on('error', reject);
    request.end();
  });
}

/** Reads the body, decompressed, and stops (closing the connection) as soon as it passes the limit. */
function readLimited(response: IncomingMessage, signal: AbortSignal, url: string): Promise<Buffer> {
  const encoding = String(response.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
  let stream: Readable = response;
  if (encoding === 'gzip' || encoding === 'x-gzip') stream = response.pipe(zlib.createGunzip());
  else if (encoding === 'deflate') stream = response.pipe(zlib.createInflate());
  else if (encoding === 'br') stream = response.pipe(zlib.createBrotliDecompress());
  else if (encoding !== 'identity') {
    response.destroy();
    return Promise.reject(new BridgeError('reconcile_bad_response', `GET ${url}: content-encoding ${encoding}`, { retryable: false }));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (error: unknown) => {
      response.destroy();
      if (stream !== response) stream.destroy();
      reject(error);
    };
    signal.addEventListener('abort', () => fail(signal.reason), { once: true });
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        fail(new BridgeError('reconcile_bad_response', `GET ${url}: body over ${MAX_BODY_BYTES} bytes`, { retryable: false }));
        return;
      }
      chunks.push(chunk);
    });
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', (error) =>
      fail(
        error instanceof BridgeError
          ? error
          : new BridgeError('reconcile_bad_response', `GET ${url}: ${error.message}`, { retryable: false }),
      ),
    );
    response.on('error', fail);
  });
}

function parseJsonObject(body: Buffer): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return isObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The version a 404/410 body states for the deletion, if it states one; anything else is no version. */
function goneVersion(parsed: Record<string, unknown>): number | undefined {
  const version = parsed.version ?? (isObject(parsed.resource) ? parsed.resource.version : undefined);
  return typeof version === 'number' && Number.isSafeInteger(version) && version >= 0 ? version : undefined;
}

/** What the body says it is about (see StatedIdentity); absent and null fields state nothing. */
export function statedIdentity(body: Record<string, unknown> | undefined): StatedIdentity {
  if (body === undefined) return {};
  const resource = isObject(body.resource) ? body.resource : {};
  const text = (value: unknown) =>
    value === undefined || value === null
      ? undefined
      : typeof value === 'string'
        ? value
        : typeof value === 'number'
          ? String(value)
          : JSON.stringify(value);
  const all = (...values: unknown[]) => {
    const stated = values.map(text).filter((v): v is string => v !== undefined);
    return stated.length === 0 ? undefined : stated;
  };
  const tenantId = text(body.tenant_id);
  const type = all(resource.type, body.type);
  const id = all(resource.id, body.id);
  return { ...(tenantId === undefined ? {} : { tenantId }), ...(type === undefined ? {} : { type }), ...(id === undefined ? {} : { id }) };
}

/** The time the body states (see StatedTime), if any. */
export function statedTime(body: Record<string, unknown> | undefined): StatedTime | undefined {
  for (const field of ['occurred_at', 'updated_at'] as const) {
    const value = body?.[field];
    if (value !== undefined && value !== null) return { field, value: typeof value === 'string' ? value : JSON.stringify(value) };
  }
  return undefined;
}

/**
 * The snapshot's version, data, identity and time; throws reconcile_bad_response when the body has
 * no data, or a version that is not a non-negative integer. A body without a version is the
 * reconciler's to judge (a type ordered by occurred_at needs none).
 */
export function parseSnapshotBody(
  text: string,
  url = 'response',
): { version?: number; data: Record<string, unknown>; stated: StatedIdentity; time?: StatedTime } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BridgeError('reconcile_bad_response', `${url}: body is not JSON`, { retryable: false });
  }
  if (!isObject(body)) throw new BridgeError('reconcile_bad_response', `${url}: body is not a JSON object`, { retryable: false });
  const version = body.version ?? (isObject(body.resource) ? body.resource.version : undefined);
  if (version !== undefined && (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 0)) {
    throw new BridgeError('reconcile_bad_response', `${url}: "version" (or "resource.version") is not a non-negative integer`, {
      retryable: false,
    });
  }
  if (!isObject(body.data)) throw new BridgeError('reconcile_bad_response', `${url}: no "data" object`, { retryable: false });
  const time = statedTime(body);
  return {
    ...(version === undefined ? {} : { version }),
    data: body.data,
    stated: statedIdentity(body),
    ...(time === undefined ? {} : { time }),
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
