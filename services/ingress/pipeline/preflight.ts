import { randomBytes } from 'node:crypto';
import {
  parseSignedTimestamp,
  SIGNATURE_HEADERS,
  SIGNATURE_SCHEMES,
  TIMESTAMP_FORMS,
  type SignatureHeaderNames,
  type SignatureScheme,
} from '#domain/signing/index.ts';
import type { WebhookSource } from '#domain/sources/index.ts';
import type { Rejection } from './rejections.ts';
import { isJsonContentType, singleHeader, type BodyResult, type HeaderResult, type RequestHeaders } from './request.ts';

export const OPTIONAL_HEADERS = {
  eventType: 'x-webhook-event',
  idempotencyKey: 'x-idempotency-key',
  // The provider's attempt number for this delivery (1 = first); recorded, never trusted for anything else.
  retry: 'x-webhook-retry',
} as const;
// Providers that follow the contract's other spelling send the id as X-Webhook-Event-Id.
const ID_HEADER_ALIASES: Readonly<Record<string, string>> = { 'x-webhook-id': 'x-webhook-event-id' };
const RETRY_VALUE = /^\d{1,9}$/;

/** The configured sources by id, and the stand-in every other id is checked against. */
export class SourceDirectory {
  /**
   * An unknown source id goes through exactly what a source of the default scheme does with a
   * request it cannot verify (header checks, the body read, an HMAC) and gets the same 401: the
   * answers do not tell which ids exist. Its secret is random and never matches; even if it did,
   * the answer is 401.
   */
  readonly unknown: WebhookSource = {
    id: 'unknown',
    scheme: 'hmac-sha256',
    secrets: [{ id: 'unknown', value: randomBytes(32).toString('hex') }],
    tenants: [],
    toleranceSeconds: 300,
    resourceTypes: [],
  };
  private byId: ReadonlyMap<string, WebhookSource>;
  private isLoaded: boolean;

  /** `loaded: false`: sources come later (from Postgres); until replace() every request is refused. */
  constructor(sources: readonly WebhookSource[], { loaded = true }: { loaded?: boolean } = {}) {
    this.byId = new Map(sources.map((s) => [s.id, s]));
    this.isLoaded = loaded;
  }

  /** Whether a set of sources was given yet. */
  get loaded(): boolean {
    return this.isLoaded;
  }

  /**
   * Swaps in a whole new set at once (a snapshot from Postgres). A request already past lookup
   * keeps the source object it got; the next lookup sees the new set.
   */
  replace(sources: readonly WebhookSource[]): void {
    this.byId = new Map(sources.map((s) => [s.id, s]));
    this.isLoaded = true;
  }

  get ids(): string[] {
    return [...this.byId.keys()];
  }

  lookup(id: string): WebhookSource {
    return this.byId.get(id) ?? this.unknown;
  }

  /** The `source` metric label and log field: configured ids only, so label values stay bounded. */
  label(id: string): string {
    return this.byId.has(id) ? id : 'unknown';
  }
}

export interface PreflightOptions {
  sources: SourceDirectory;
  bodyLimitBytes: number;
}

/** A request whose headers passed: what verify needs, and what parse checks the envelope against. */
export interface Delivery {
  source: WebhookSource;
  /** false: `source` is the directory's stand-in for an id nobody configured. */
  known: boolean;
  /** A configured source, sent another scheme's headers: `source` is the stand-in, and verify refuses it. */
  otherScheme: boolean;
  names: SignatureHeaderNames;
  id: string;
  /** Absent for a scheme that signs no timestamp. */
  timestamp: string | undefined;
  signature: string;
  eventType: string | undefined;
  idempotencyKey: string | undefined;
  deliveryAttempt: number | undefined;
}

const SHUTTING_DOWN: Rejection = { kind: 'shutting_down' };
const BODY_TOO_LARGE: Rejection = { kind: 'body_too_large' };
const INFLIGHT_BODY_BYTES: Rejection = { kind: 'inflight_body_bytes' };
const CLIENT_BODY_BYTES: Rejection = { kind: 'client_body_bytes' };
const BODY_IDLE_TIMEOUT: Rejection = { kind: 'body_idle_timeout' };
const BODY_TIMEOUT: Rejection = { kind: 'body_timeout' };

/**
 * Everything decided from the request line and headers alone, before a byte of the body is read
 * or trusted. `bodyComplete` is node:http's req.complete (the body is already in, or there is none).
 */
export function preflight(
  options: PreflightOptions,
  sourceId: string,
  headers: RequestHeaders,
  bodyComplete: boolean,
  closing: boolean,
): Delivery | Rejection {
  const limit = options.bodyLimitBytes;
  const declared = singleHeader(headers, 'content-length');
  const declaredBytes = declared.ok && declared.value !== undefined ? Number(declared.value) : undefined;
  const bodyUnbounded = !bodyComplete && (declaredBytes === undefined || declaredBytes > limit);
  if (closing) return SHUTTING_DOWN;
  // No source known yet (sources from Postgres, not loaded since start-up): 503 with Retry-After
  // rather than the 401 of an unknown source, so providers retry instead of counting a failure
  // (some disable an endpoint after enough 4xx). Every id gets it alike: nothing is enumerated.
  if (!options.sources.loaded) return { kind: 'sources_not_loaded', bodyUnbounded };
  if (declaredBytes !== undefined && declaredBytes > limit) return BODY_TOO_LARGE;
  if (!isJsonContentType(headers)) return { kind: 'unsupported_media_type', bodyUnbounded };

  // Everything up to here, and the signature headers' check, reads the request alone: the source's
  // own scheme is consulted only after it, so no answer depends on which ids exist.
  const headerProblem = signatureHeadersProblem(headers, bodyUnbounded) ?? malformedTimestamp(headers, bodyUnbounded);
  if (headerProblem !== undefined) return headerProblem;

  const configured = options.sources.lookup(sourceId);
  // A complete set of another scheme's headers goes through exactly what an unknown id does (the
  // stand-in's checks, the body read, its HMAC) and verify refuses it (missing_header, 401): the
  // same answer after the same work.
  const otherScheme = configured !== options.sources.unknown && !hasHeadersOf(headers, configured.scheme);
  const source = otherScheme ? options.sources.unknown : configured;
  const names = SIGNATURE_HEADERS[source.scheme];
  const id = idHeader(headers, names.id).value ?? '';
  const timestamp = names.timestamp === undefined ? undefined : (singleHeader(headers, names.timestamp).value ?? '');
  const signature = singleHeader(headers, names.signature).value ?? '';

  const eventType = singleHeader(headers, OPTIONAL_HEADERS.eventType);
  const idempotencyKey = singleHeader(headers, OPTIONAL_HEADERS.idempotencyKey);
  const retry = singleHeader(headers, OPTIONAL_HEADERS.retry);
  if (!eventType.ok || !idempotencyKey.ok || !retry.ok) return { kind: 'repeated_optional_header', bodyUnbounded };
  if (retry.value !== undefined && !RETRY_VALUE.test(retry.value))
    return { kind: 'malformed_retry_header', header: OPTIONAL_HEADERS.retry, bodyUnbounded };

  return {
    source,
    known: configured !== options.sources.unknown,
    otherScheme,
    names,
    id,
    timestamp,
    signature,
    eventType: eventType.value,
    idempotencyKey: idempotencyKey.value,
    deliveryAttempt: retry.value === undefined ? undefined : Number(retry.value),
  };
}

/** The answer to a body read that did not produce a body; undefined when the client went away (nobody to answer). */
export function bodyRejection(read: Exclude<BodyResult, { kind: 'ok' }>): Rejection | undefined {
  if (read.kind === 'too_large') return BODY_TOO_LARGE;
  if (read.kind === 'over_budget') return INFLIGHT_BODY_BYTES;
  if (read.kind === 'client_over_budget') return CLIENT_BODY_BYTES;
  if (read.kind === 'idle_timeout') return BODY_IDLE_TIMEOUT;
  if (read.kind === 'timeout') return BODY_TIMEOUT;
  return undefined;
}

// Every header a scheme signs with, and the id's alias: a repeat of any of them is refused
// whatever the source's scheme.
const SIGNATURE_HEADER_NAMES: readonly string[] = [
  ...new Set(SIGNATURE_SCHEMES.flatMap((scheme) => Object.values(SIGNATURE_HEADERS[scheme]) as string[])),
  ...Object.values(ID_HEADER_ALIASES),
];

/**
 * 400 when the request carries no complete set of any scheme's required headers, or repeats one of
 * them, or sends both id spellings with different values. It looks at no source: a request that
 * passes carries a complete set of some scheme, and a source of another scheme refuses it in verify
 * like a bad signature. The header named missing is the first one absent from the scheme the
 * request came closest to (fewest missing; ties in SIGNATURE_SCHEMES order).
 */
function signatureHeadersProblem(headers: RequestHeaders, bodyUnbounded: boolean): Rejection | undefined {
  for (const name of SIGNATURE_HEADER_NAMES) {
    if (!singleHeader(headers, name).ok) return { kind: 'repeated_header', header: name, bodyUnbounded };
  }
  for (const [name, alias] of Object.entries(ID_HEADER_ALIASES)) {
    if (idHeader(headers, name).conflict) return { kind: 'event_id_headers_differ', header: name, alias, bodyUnbounded };
  }
  for (const scheme of SIGNATURE_SCHEMES) if (hasHeadersOf(headers, scheme)) return undefined;
  let closest: string[] | undefined;
  for (const scheme of SIGNATURE_SCHEMES) {
    const missing = missingHeadersOf(headers, scheme);
    if (closest === undefined || missing.length < closest.length) closest = missing;
  }
  return { kind: 'missing_header', header: closest![0]!, bodyUnbounded };
}

/**
 * A timestamp header in none of its scheme's forms is a malformed request (400, seed 004), not a bad
 * signature. Judged by the header's name, not by the source, so an unknown id gets the same answer.
 */
function malformedTimestamp(headers: RequestHeaders, bodyUnbounded: boolean): Rejection | undefined {
  for (const scheme of SIGNATURE_SCHEMES) {
    const name = SIGNATURE_HEADERS[scheme].timestamp;
    if (name === undefined) continue;
    const value = singleHeader(headers, name).value;
    if (value === undefined || value === '' || parseSignedTimestamp(scheme, value) !== undefined) continue;
    const forms = TIMESTAMP_FORMS[scheme].includes('iso') ? 'unix seconds or an ISO-8601 time with Z or an offset' : 'unix seconds';
    return { kind: 'malformed_timestamp', header: name, forms, bodyUnbounded };
  }
  return undefined;
}

/** The scheme's required headers the request lacks (absent or empty), in the scheme's order. */
function missingHeadersOf(headers: RequestHeaders, scheme: SignatureScheme): string[] {
  const names = SIGNATURE_HEADERS[scheme];
  const required = [names.id, ...(names.timestamp === undefined ? [] : [names.timestamp]), names.signature];
  return required.filter((name) => !present(name === names.id ? idHeader(headers, name) : singleHeader(headers, name)));
}

/** missingHeadersOf(...).length === 0, without building the list (every request asks this). */
function hasHeadersOf(headers: RequestHeaders, scheme: SignatureScheme): boolean {
  const names = SIGNATURE_HEADERS[scheme];
  return (
    present(idHeader(headers, names.id)) &&
    (names.timestamp === undefined || present(singleHeader(headers, names.timestamp))) &&
    present(singleHeader(headers, names.signature))
  );
}

function present(header: HeaderResult): boolean {
  return header.value !== undefined && header.value !== '';
}

/** The id header, or its alias; `conflict` when both are sent with different values. */
function idHeader(headers: RequestHeaders, name: string): HeaderResult & { conflict?: boolean } {
  const primary = singleHeader(headers, name);
  const aliasName = ID_HEADER_ALIASES[name];
  if (aliasName === undefined || !primary.ok) return primary;
  const alias = singleHeader(headers, aliasName);
  if (!alias.ok) return alias;
  if (primary.value === undefined) return alias;
  if (alias.value !== undefined && alias.value !== primary.value) return { ...primary, conflict: true };
  return primary;
}
