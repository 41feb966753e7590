import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import type { ReconcileSettings } from '#domain/sources/index.ts';
import { expandUrlTemplate, type ResourceRefValues } from './url-template.ts';

/** What the provider's API said about one resource. */
export type ProviderAnswer =
  | { kind: 'snapshot'; status: number; url: string; version: number; data: Record<string, unknown> }
  | { kind: 'gone'; status: number; url: string };

const MAX_BODY_BYTES = 1024 * 1024;

/**
 * One GET for a resource's current snapshot. 200 with `{ "version": n, "data": {...} }` (or the
 * envelope's shape, `resource.version`) is a snapshot; 404 and 410 mean the resource is gone.
 * A timeout, a network error, 408, 429 and any 5xx are transient (retryable); any other answer is
 * a permanent `reconcile_bad_response`.
 */
export async function fetchSnapshot(settings: ReconcileSettings, ref: ResourceRefValues): Promise<ProviderAnswer> {
  const url = expandUrlTemplate(settings.url, ref);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (settings.auth) headers[settings.auth.header.toLowerCase()] = settings.auth.value;
  let response: Response;
  let text: string;
  try {
    // The timeout covers the body too: a provider that answers the head and then stalls is as slow.
    const signal = AbortSignal.timeout(settings.timeoutMs);
    response = await fetch(url, { method: 'GET', headers, signal, redirect: 'error' });
    text = await response.text();
  } catch (error) {
    const name = (error as Error).name;
    if (name === 'TimeoutError' || name === 'AbortError') {
      throw new BridgeError('reconcile_timeout', `GET ${url}: no answer within ${settings.timeoutMs} ms`, {
        retryable: true,
        cause: error,
      });
    }
    throw new BridgeError('reconcile_unavailable', `GET ${url}: ${(error as Error).message}`, { retryable: true, cause: error });
  }
  const status = response.status;
  if (status === 404 || status === 410) return { kind: 'gone', status, url };
  if (status >= 500 || status === 408 || status === 429) {
    throw new BridgeError('reconcile_unavailable', `GET ${url}: HTTP ${status}`, { retryable: true });
  }
  if (status !== 200) throw new BridgeError('reconcile_bad_response', `GET ${url}: HTTP ${status}`, { retryable: false });
  if (Buffer.byteLength(text, 'utf8') > MAX_BODY_BYTES) {
    throw new BridgeError('reconcile_bad_response', `GET ${url}: body over ${MAX_BODY_BYTES} bytes`, { retryable: false });
  }
  return { kind: 'snapshot', status, url, ...parseSnapshotBody(text, url) };
}

/** The snapshot's version and data; throws reconcile_bad_response when the body has neither. */
export function parseSnapshotBody(text: string, url = 'response'): { version: number; data: Record<string, unknown> } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BridgeError('reconcile_bad_response', `${url}: body is not JSON`, { retryable: false });
  }
  if (!isObject(body)) throw new BridgeError('reconcile_bad_response', `${url}: body is not a JSON object`, { retryable: false });
  const version = body.version ?? (isObject(body.resource) ? body.resource.version : undefined);
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 0) {
    throw new BridgeError('reconcile_bad_response', `${url}: no integer "version" (or "resource.version")`, { retryable: false });
  }
  if (!isObject(body.data)) throw new BridgeError('reconcile_bad_response', `${url}: no "data" object`, { retryable: false });
  return { version, data: body.data };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
