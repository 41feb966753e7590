import type { WebhookSource } from '#domain/sources/index.ts';
import type { Rejection } from './rejections.ts';

interface Bucket {
  tokens: number;
  capacity: number;
  /** Tokens per second. */
  rate: number;
}

interface SourceBuckets {
  requestsPerSecond: number | undefined;
  bytesPerSecond: number | undefined;
  requests: Bucket | undefined;
  bytes: Bucket | undefined;
  atMs: number;
}

/**
 * A source's `limits` on this ingress: a token bucket for requests and one for body bytes, each
 * refilled at its per-second rate and holding one second's worth (a burst). The bytes bucket holds
 * at least one body at the body limit, so a body the ingress takes at all can pass. Only verified
 * requests are taken from it: forged traffic cannot use up a provider's budget. A refused request
 * takes nothing.
 */
export class SourceLimiter {
  readonly #bodyLimitBytes: number;
  readonly #nowMs: () => number;
  readonly #bySource = new Map<string, SourceBuckets>();

  /** `nowMs`: a monotonic clock in milliseconds (tests pass their own). */
  constructor(bodyLimitBytes: number, nowMs: () => number = () => performance.now()) {
    this.#bodyLimitBytes = bodyLimitBytes;
    this.#nowMs = nowMs;
  }

  /** undefined when the request may go on (its request and bytes taken), else the 429 to answer. */
  take(source: WebhookSource, bodyBytes: number): Extract<Rejection, { kind: 'source_rate_limited' }> | undefined {
    const limits = source.limits;
    if (limits === undefined) return undefined;
    const now = this.#nowMs();
    let state = this.#bySource.get(source.id);
    // New limits (a changed source) start from full buckets.
    if (state === undefined || state.requestsPerSecond !== limits.requestsPerSecond || state.bytesPerSecond !== limits.bytesPerSecond) {
      state = {
        requestsPerSecond: limits.requestsPerSecond,
        bytesPerSecond: limits.bytesPerSecond,
        requests:
          limits.requestsPerSecond === undefined ? undefined : full(limits.requestsPerSecond, Math.max(1, limits.requestsPerSecond)),
        bytes:
          limits.bytesPerSecond === undefined
            ? undefined
            : full(limits.bytesPerSecond, Math.max(limits.bytesPerSecond, this.#bodyLimitBytes)),
        atMs: now,
      };
      this.#bySource.set(source.id, state);
    }
    const elapsedSeconds = Math.max(0, now - state.atMs) / 1000;
    state.atMs = now;
    if (state.requests) refill(state.requests, elapsedSeconds);
    if (state.bytes) refill(state.bytes, elapsedSeconds);
    if (state.requests && state.requests.tokens < 1) return limited('requests', state.requests, 1);
    const bytes = Math.min(bodyBytes, state.bytes?.capacity ?? 0);
    if (state.bytes && state.bytes.tokens < bytes) return limited('bytes', state.bytes, bytes);
    if (state.requests) state.requests.tokens -= 1;
    if (state.bytes) state.bytes.tokens -= bytes;
    return undefined;
  }

  /** Forgets the buckets of sources no longer served. */
  retain(ids: ReadonlySet<string>): void {
    for (const id of this.#bySource.keys()) if (!ids.has(id)) this.#bySource.delete(id);
  }
}

function full(rate: number, capacity: number): Bucket {
  return { tokens: capacity, capacity, rate };
}

function refill(bucket: Bucket, elapsedSeconds: number): void {
  bucket.tokens = Math.min(bucket.capacity, bucket.tokens + bucket.rate * elapsedSeconds);
}

/** Retry-After: whole seconds until the bucket holds what the request needs, at least 1. */
function limited(limit: 'requests' | 'bytes', bucket: Bucket, needed: number): Extract<Rejection, { kind: 'source_rate_limited' }> {
  const seconds = Math.max(1, Math.ceil((needed - bucket.tokens) / bucket.rate));
  return { kind: 'source_rate_limited', limit, retryAfterSeconds: seconds };
}
