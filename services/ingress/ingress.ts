import { randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Kafka } from 'kafkajs';
import { Registry } from 'prom-client';
import { EVENT_HEADERS, eventAction, parseEvent, resourceKey } from '#domain/contract/index.ts';
import type { ParseErrorCode } from '#domain/contract/index.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import { startAdminServer } from '#plumbing/observability/admin-server.ts';
import { SIGNATURE_HEADERS, verifySignature } from '#domain/signing/index.ts';
import type { WebhookSource } from '#domain/sources/index.ts';
import { BodyBudget, isJsonContentType, readRawBody, releaseBody, singleHeader, type HeaderResult } from './http-input.ts';
import { createIngressMetrics, type IngressMetrics } from './metrics.ts';
import { BatchingPublisher, PublishError } from './publisher.ts';

export interface IngressConfig {
  /** Public port; 0 picks a free one (tests). */
  port: number;
  host?: string;
  /** Admin port (/metrics, /healthz, /readyz); 0 picks a free one. */
  adminPort: number;
  adminHost?: string;
  brokers: string[];
  clientId?: string;
  /** The events topic; it must exist (topics come from shared/plumbing/kafka/topics.ts, never auto-created). */
  topic: string;
  sources: WebhookSource[];
  bodyLimitBytes?: number;
  ackTimeoutMs?: number;
  retryAfterSeconds?: number;
  maxBatchRecords?: number;
  maxBatchBytes?: number;
  lingerMs?: number;
  probeIntervalMs?: number;
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
  /** Open connections at once; past it node closes a new connection as soon as it is accepted. */
  maxConnections?: number;
  /** Request body bytes buffered at once across requests; past it a request is answered 503. */
  maxInflightBodyBytes?: number;
  maxJsonDepth?: number;
  logLevel?: string;
}

export interface IngressDeps {
  logger?: Logger;
  registry?: Registry;
  kafka?: Kafka;
  /** Unix seconds; tests move the clock to exercise the timestamp window. */
  nowSeconds?: () => number;
}

export interface IngressHandle {
  url: string;
  adminUrl: string;
  port: number;
  adminPort: number;
  registry: Registry;
  /** Broker reachable and accepting requests (what /readyz reports). */
  ready: () => boolean;
  /** Requests being handled right now (read, verified or waiting for their ack). */
  activeRequests: () => number;
  /** Stops accepting, answers in-flight requests after their acks, flushes, disconnects. */
  close: () => Promise<void>;
}

export const ingressDefaults = {
  bodyLimitBytes: 1024 * 1024,
  ackTimeoutMs: 5000,
  retryAfterSeconds: 5,
  maxBatchRecords: 500,
  maxBatchBytes: 512 * 1024,
  lingerMs: 2,
  probeIntervalMs: 1000,
  // Node's defaults (60 s headers, 300 s request) let slow clients hold sockets for minutes.
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5000,
  // Without caps, each unauthenticated client may hold a socket and up to bodyLimitBytes for
  // requestTimeoutMs. 1024 connections; 64 MiB of bodies (64 requests at the 1 MiB limit, tens of
  // thousands of typical 1-2 KiB webhooks).
  maxConnections: 1024,
  maxInflightBodyBytes: 64 * 1024 * 1024,
  maxJsonDepth: 32,
} as const;

// What express's `POST /webhooks/:source` (case-insensitive, optional trailing slash, query
// ignored) matches, minus percent-encoded sources, which express decodes and this leaves to it.
const WEBHOOK_PATH = /^\/webhooks\/([^/?#%]+)\/?(?:\?|$)/i;

const UNAUTHORIZED = JSON.stringify({ error: 'unauthorized' });
const OPTIONAL_HEADERS = {
  eventType: 'x-webhook-event',
  idempotencyKey: 'x-idempotency-key',
  // The provider's attempt number for this delivery (1 = first); recorded, never trusted for anything else.
  retry: 'x-webhook-retry',
} as const;
// Providers that follow the contract's other spelling send the id as X-Webhook-Event-Id.
const ID_HEADER_ALIASES: Readonly<Record<string, string>> = { 'x-webhook-id': 'x-webhook-event-id' };
const RETRY_VALUE = /^\d{1,9}$/;

interface Outcome {
  status: number;
  body: string;
  reason: string;
  eventId?: string;
  eventType?: string;
  deliveryAttempt?: number;
  tenant?: string;
  resource?: string;
  bodySha256?: string;
  retryAfter?: boolean;
  closeConnection?: boolean;
}

const PARSE_STATUS: Record<ParseErrorCode, number> = {
  invalid_utf8: 400,
  invalid_json: 400,
  too_deep: 400,
  forbidden_key: 400,
  invalid_string: 422,
  unknown_event_version: 422,
  invalid_envelope: 422,
  invalid_data: 422,
};

function errorBody(error: string, message?: string): string {
  return JSON.stringify(message === undefined ? { error } : { error, message });
}

export async function startIngress(config: IngressConfig, deps: IngressDeps = {}): Promise<IngressHandle> {
  const settings = { ...ingressDefaults, ...stripUndefined(config) };
  const logger = deps.logger ?? createLogger({ name: 'ingress', level: config.logLevel });
  const registry = deps.registry ?? new Registry();
  const budget = new BodyBudget(settings.maxInflightBodyBytes);
  const metrics = createIngressMetrics(registry, { inflightBodyBytes: () => budget.usedBytes });
  metrics.overloadRefusals.inc({ reason: 'max_connections' }, 0);
  metrics.overloadRefusals.inc({ reason: 'inflight_body_bytes' }, 0);
  const nowSeconds = deps.nowSeconds ?? (() => Math.floor(Date.now() / 1000));
  const kafka = deps.kafka ?? createKafka({ brokers: config.brokers, clientId: config.clientId ?? 'ingress', logger });
  const sources = new Map(config.sources.map((s) => [s.id, s]));
  // An unknown source id goes through exactly what a source of the default scheme does with a
  // request it cannot verify (header checks, the body read, an HMAC) and gets the same 401: the
  // answers do not tell which ids exist. Its secret is random and never matches; even if it did,
  // the answer is 401.
  const unknownSource: WebhookSource = {
    id: 'unknown',
    scheme: 'hmac-sha256',
    secrets: [{ id: 'unknown', value: randomBytes(32).toString('hex') }],
    tenants: [],
    toleranceSeconds: 300,
    resourceTypes: [],
  };
  // The per-request line carries only the fields built in respond() (ids, status, reason,
  // latency, digest), none of which the redaction paths (secret, signature, body) can match, so
  // this child skips the redaction pass (about a third of the cost of each line).
  const requestLog = logger.child({ component: 'request' }, { redact: [] });

  const publisher = new BatchingPublisher({
    kafka,
    topic: config.topic,
    logger,
    metrics,
    ackTimeoutMs: settings.ackTimeoutMs,
    maxBatchRecords: settings.maxBatchRecords,
    maxBatchBytes: settings.maxBatchBytes,
    lingerMs: settings.lingerMs,
    probeIntervalMs: settings.probeIntervalMs,
  });
  let closing = false;
  let active = 0;
  let idle: (() => void) | undefined;

  async function decide(req: IncomingMessage, sourceId: string, receivedAt: Date): Promise<Outcome | undefined> {
    const declared = singleHeader(req, 'content-length');
    const declaredBytes = declared.ok && declared.value !== undefined ? Number(declared.value) : undefined;
    // Refused before the body is read: node:http discards a body of known, bounded length and
    // keeps the connection; a body of unknown or excessive length is cut off with the connection.
    const unboundedBody = !req.complete && (declaredBytes === undefined || declaredBytes > settings.bodyLimitBytes);
    const source = sources.get(sourceId) ?? unknownSource;
    if (closing) return { status: 503, body: errorBody('unavailable'), reason: 'shutting_down', retryAfter: true, closeConnection: true };
    if (declaredBytes !== undefined && declaredBytes > settings.bodyLimitBytes) {
      return { status: 413, body: errorBody('payload_too_large'), reason: 'body_too_large', closeConnection: true };
    }
    if (!isJsonContentType(req)) {
      return { status: 415, body: errorBody('unsupported_media_type'), reason: 'unsupported_media_type', closeConnection: unboundedBody };
    }

    const names = SIGNATURE_HEADERS[source.scheme];
    const id = idHeader(req, names.id);
    const timestamp = names.timestamp === undefined ? undefined : singleHeader(req, names.timestamp);
    const signature = singleHeader(req, names.signature);
    const eventTypeHeader = singleHeader(req, OPTIONAL_HEADERS.eventType);
    const idempotencyHeader = singleHeader(req, OPTIONAL_HEADERS.idempotencyKey);
    const retryHeader = singleHeader(req, OPTIONAL_HEADERS.retry);
    const required: Array<readonly [string, HeaderResult]> = [[names.id, id], [names.signature, signature]];
    if (names.timestamp !== undefined && timestamp !== undefined) required.splice(1, 0, [names.timestamp, timestamp]);
    for (const [name, header] of required) {
      if (!header.ok || header.value === undefined || header.value === '') {
        const reason = header.ok ? 'missing_header' : 'repeated_header';
        metrics.signatureFailures.inc({ source: source.id, reason });
        return { status: 400, body: errorBody('bad_request', `${reason.replace('_', ' ')}: ${name}`), reason, closeConnection: unboundedBody };
      }
    }
    if (id.conflict) {
      return { status: 400, body: errorBody('event_id_mismatch', `${names.id} and ${ID_HEADER_ALIASES[names.id]} differ`), reason: 'event_id_mismatch', closeConnection: unboundedBody };
    }
    if (!eventTypeHeader.ok || !idempotencyHeader.ok || !retryHeader.ok) {
      return { status: 400, body: errorBody('bad_request', 'repeated header'), reason: 'repeated_header', closeConnection: unboundedBody };
    }
    if (retryHeader.value !== undefined && !RETRY_VALUE.test(retryHeader.value)) {
      return {
        status: 400,
        body: errorBody('bad_request', `${OPTIONAL_HEADERS.retry} must be a non-negative integer`),
        reason: 'malformed_retry_header',
        closeConnection: unboundedBody,
      };
    }
    const deliveryAttempt = retryHeader.value === undefined ? undefined : Number(retryHeader.value);

    // The declared length is taken from the budget before a byte is read (handleWebhook gives it back).
    const read = await readRawBody(req, settings.bodyLimitBytes, budget, declaredBytes);
    if (read.kind === 'aborted') return undefined;
    if (read.kind === 'too_large') return { status: 413, body: errorBody('payload_too_large'), reason: 'body_too_large', closeConnection: true };
    if (read.kind === 'over_budget') {
      metrics.overloadRefusals.inc({ reason: 'inflight_body_bytes' });
      return { status: 503, body: errorBody('unavailable'), reason: 'inflight_body_bytes', retryAfter: true, closeConnection: true };
    }
    const rawBody = read.body;

    // Verify the bytes exactly as received, before any parsing: a re-serialised body is a different body.
    const verified = verifySignature({
      scheme: source.scheme,
      secrets: source.secrets,
      headers: { id: id.value, timestamp: timestamp?.value, signature: signature.value },
      rawBody,
      now: nowSeconds(),
      toleranceSeconds: source.toleranceSeconds,
    });
    if (source === unknownSource) {
      metrics.signatureFailures.inc({ source: source.id, reason: 'unknown_source' });
      return { status: 401, body: UNAUTHORIZED, reason: 'unknown_source' };
    }
    if (verified.clockSkewSeconds !== undefined) metrics.clockSkew.observe({ source: source.id }, verified.clockSkewSeconds);
    if (!verified.ok) {
      metrics.signatureFailures.inc({ source: source.id, reason: verified.reason });
      // The reason goes to logs and metrics only: telling the caller would help a forger.
      return { status: 401, body: UNAUTHORIZED, reason: verified.reason };
    }
    metrics.signatureVerifications.inc({ source: source.id, secret_id: verified.secretId });

    const parsed = parseEvent(rawBody, { maxDepth: settings.maxJsonDepth });
    if (!parsed.ok) {
      return { status: PARSE_STATUS[parsed.code], body: errorBody(parsed.code, parsed.message), reason: parsed.code, bodySha256: parsed.bodySha256 };
    }
    const envelope = parsed.envelope;
    const key = resourceKey(envelope);
    // The event type becomes a metric label only once it is one the source may publish: label
    // values stay bounded by configuration, whatever a caller sends.
    const typeAllowed = source.resourceTypes.includes(envelope.resource.type);
    const described = {
      eventId: envelope.event_id,
      eventType: typeAllowed ? envelope.event_type : undefined,
      deliveryAttempt,
      tenant: envelope.tenant_id,
      resource: key,
      bodySha256: parsed.bodySha256,
    };
    if (envelope.event_id !== id.value) {
      return { ...described, status: 400, body: errorBody('event_id_mismatch', `${names.id} must equal event_id`), reason: 'event_id_mismatch' };
    }
    if (eventTypeHeader.value !== undefined && eventTypeHeader.value !== envelope.event_type) {
      return { ...described, status: 400, body: errorBody('event_type_mismatch', `${OPTIONAL_HEADERS.eventType} must equal event_type`), reason: 'event_type_mismatch' };
    }
    if (idempotencyHeader.value !== undefined && idempotencyHeader.value !== envelope.idempotency_key) {
      return {
        ...described,
        status: 400,
        body: errorBody('idempotency_key_mismatch', `${OPTIONAL_HEADERS.idempotencyKey} must equal idempotency_key`),
        reason: 'idempotency_key_mismatch',
      };
    }
    if (!typeAllowed) {
      const allowed = source.resourceTypes.join(', ');
      return {
        ...described,
        status: 422,
        body: errorBody('resource_type_not_allowed', `resource type "${envelope.resource.type}" is not one this source publishes (${allowed})`),
        reason: 'resource_type_not_allowed',
      };
    }
    if (!source.tenants.includes(envelope.tenant_id)) {
      return { ...described, status: 403, body: errorBody('forbidden', 'source may not publish for this tenant'), reason: 'tenant_not_allowed' };
    }
    const strict = source.strictSchemas?.[envelope.resource.type];
    if (strict !== undefined && eventAction(envelope) !== 'delete') {
      const problem = strict.check(envelope.data);
      if (problem !== undefined) return { ...described, status: 422, body: errorBody('invalid_data', problem), reason: 'strict_schema' };
    }

    const headers: Record<string, string> = {
      [EVENT_HEADERS.eventId]: envelope.event_id,
      [EVENT_HEADERS.source]: source.id,
      [EVENT_HEADERS.receivedAt]: receivedAt.toISOString(),
      [EVENT_HEADERS.secretId]: verified.secretId,
      [EVENT_HEADERS.bodySha256]: parsed.bodySha256,
      [EVENT_HEADERS.eventType]: envelope.event_type,
    };
    if (envelope.idempotency_key !== undefined) headers[EVENT_HEADERS.idempotencyKey] = envelope.idempotency_key;
    if (deliveryAttempt !== undefined) headers[EVENT_HEADERS.deliveryAttempt] = String(deliveryAttempt);
    try {
      // The raw bytes go to Kafka unchanged: consumers verify the same body-sha256 the provider sent.
      await publisher.publish({ key, value: rawBody, headers });
    } catch (error) {
      if (error instanceof PublishError) {
        if (error.code === 'record_too_large') return { ...described, status: 413, body: errorBody('payload_too_large'), reason: error.code };
        return { ...described, status: 503, body: errorBody('unavailable'), reason: error.code, retryAfter: true };
      }
      throw error;
    }
    return { ...described, status: 202, body: JSON.stringify({ status: 'accepted', event_id: envelope.event_id }), reason: 'accepted' };
  }

  function respond(req: IncomingMessage, res: ServerResponse, sourceId: string, started: number, outcome: Outcome): void {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-store' };
    if (outcome.retryAfter) headers['retry-after'] = String(settings.retryAfterSeconds);
    if (outcome.closeConnection || closing) headers.connection = 'close';
    res.writeHead(outcome.status, headers).end(outcome.body);
    if (outcome.closeConnection && !req.complete) {
      // The unread rest of the body would otherwise be read and discarded up to requestTimeout.
      res.once('finish', () => req.socket.destroySoon());
    }
    const latencyMs = performance.now() - started;
    const sourceLabel = sources.has(sourceId) ? sourceId : 'unknown';
    const status = String(outcome.status);
    metrics.requests.inc({ source: sourceLabel, event_type: outcome.eventType ?? 'unknown', status });
    metrics.requestDuration.observe({ status }, latencyMs / 1000);
    const line = {
      event_id: outcome.eventId,
      source: sourceLabel,
      tenant: outcome.tenant,
      resource: outcome.resource,
      status: outcome.status,
      reason: outcome.reason,
      delivery_attempt: outcome.deliveryAttempt,
      latency_ms: Math.round(latencyMs * 100) / 100,
      body_sha256: outcome.bodySha256,
    };
    if (outcome.status >= 500) requestLog.warn(line, 'webhook');
    else requestLog.info(line, 'webhook');
  }

  function handleWebhook(req: IncomingMessage, res: ServerResponse, sourceId: string): void {
    const started = performance.now();
    const receivedAt = new Date();
    active += 1;
    decide(req, sourceId, receivedAt)
      .then((outcome) => {
        if (outcome) respond(req, res, sourceId, started, outcome);
        else requestLog.info({ source: sources.has(sourceId) ? sourceId : 'unknown', reason: 'client_aborted' }, 'webhook');
      })
      .catch((error: unknown) => {
        logger.error({ err: error, source: sourceId }, 'unexpected error handling a webhook');
        if (!res.headersSent) respond(req, res, sourceId, started, { status: 500, body: errorBody('internal_error'), reason: 'internal_error' });
      })
      .finally(() => {
        releaseBody(req, budget);
        active -= 1;
        if (active === 0) idle?.();
      });
  }

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post('/webhooks/:source', (req: Request<{ source: string }>, res: Response) => handleWebhook(req, res, req.params.source));
  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: 'not_found' });
  });
  app.use((error: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
    const status = error.status && error.status >= 400 && error.status < 500 ? error.status : 500;
    if (status === 500) logger.error({ err: error }, 'unexpected error');
    res.status(status).json({ error: status === 500 ? 'internal_error' : 'bad_request' });
  });

  const server = http.createServer(
    {
      headersTimeout: settings.headersTimeoutMs,
      requestTimeout: settings.requestTimeoutMs,
      keepAliveTimeout: settings.keepAliveTimeoutMs,
      // Node checks the two timeouts above only this often (default 30 s), which would stretch them.
      connectionsCheckingInterval: Math.min(1000, settings.headersTimeoutMs),
      maxHeaderSize: 16 * 1024,
    },
    (req, res) => {
      // The hot route skips express's router; the handler uses only node:http's request and
      // response. Anything the pattern does not take as is (percent-encoded source, other
      // methods and paths) goes through express, which answers it exactly as before.
      const match = req.method === 'POST' ? WEBHOOK_PATH.exec(req.url ?? '') : null;
      if (match) handleWebhook(req, res, match[1]!);
      else app(req, res);
    },
  );
  server.maxHeadersCount = 100;
  // Over the cap node closes the new connection as soon as it is accepted (no answer is possible
  // without reading a request from it).
  server.maxConnections = settings.maxConnections;
  server.on('drop', () => metrics.overloadRefusals.inc({ reason: 'max_connections' }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  const admin = await startAdminServer({
    port: config.adminPort,
    host: config.adminHost,
    registry,
    logger,
    // publisher.status says why the broker is unavailable: the admin server logs it, never answers it.
    ready: async () => ({
      ready: !closing && publisher.available,
      checks: { broker: publisher.available || publisher.status, accepting: !closing },
    }),
  }).catch(async (error: unknown) => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await publisher.close();
    throw error;
  });

  // Listening before the first broker probe: /readyz answers (false) while the broker or the
  // topic is missing, instead of the port staying closed.
  await publisher.start();

  const displayHost = (host: string | undefined) => (host === undefined || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host);
  logger.info({ port, adminPort: admin.port, topic: config.topic, sources: [...sources.keys()] }, 'ingress listening');

  let closed: Promise<void> | undefined;
  async function shutdown(): Promise<void> {
    closing = true;
    const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    // In-flight requests still get their ack (or their 503) before the producer goes away.
    if (active > 0) {
      await Promise.race([
        new Promise<void>((resolve) => {
          idle = resolve;
        }),
        new Promise<void>((resolve) => setTimeout(resolve, settings.ackTimeoutMs + 2000).unref()),
      ]);
    }
    await publisher.close();
    server.closeIdleConnections();
    const forced = setTimeout(() => server.closeAllConnections(), 1000);
    forced.unref();
    await serverClosed;
    clearTimeout(forced);
    await admin.close();
    logger.info('ingress stopped');
  }

  return {
    url: `http://${displayHost(config.host)}:${port}`,
    adminUrl: `http://${displayHost(config.adminHost)}:${admin.port}`,
    port,
    adminPort: admin.port,
    registry,
    ready: () => !closing && publisher.available,
    activeRequests: () => active,
    close: () => (closed ??= shutdown()),
  };
}

/** The id header, or its alias; `conflict` when both are sent with different values. */
function idHeader(req: IncomingMessage, name: string): HeaderResult & { conflict?: boolean } {
  const primary = singleHeader(req, name);
  const aliasName = ID_HEADER_ALIASES[name];
  if (aliasName === undefined || !primary.ok) return primary;
  const alias = singleHeader(req, aliasName);
  if (!alias.ok) return alias;
  if (primary.value === undefined) return alias;
  if (alias.value !== undefined && alias.value !== primary.value) return { ...primary, conflict: true };
  return primary;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export type { IngressMetrics };
