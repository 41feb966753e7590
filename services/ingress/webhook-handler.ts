import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ParseEventOptions } from '#domain/contract/index.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { SpanKind, SpanStatusCode, type Span, type Tracing } from '#plumbing/observability/tracing.ts';
import { readRawBody, releaseBody, type BodyBudget, type BodyDeadlines } from './http-input.ts';
import type { IngressMetrics } from './metrics.ts';
import { acceptedAnswer, answerHeaders, countRejection, rejectionAnswer, type Answer } from './pipeline/answer.ts';
import { parseAndMatch } from './pipeline/parse.ts';
import type { SourceLimiter } from './pipeline/limit.ts';
import { bodyRejection, preflight, type PreflightOptions, type SourceDirectory } from './pipeline/preflight.ts';
import { publish, type EventPublisher } from './pipeline/publish.ts';
import type { Rejection } from './pipeline/rejections.ts';
import { verify } from './pipeline/verify.ts';

export interface WebhookHandlerOptions {
  sources: SourceDirectory;
  bodyLimitBytes: number;
  /** Body bytes buffered at once across requests, and per client address. */
  budget: BodyBudget;
  bodyDeadlines: BodyDeadlines;
  maxJsonDepth: number;
  retryAfterSeconds: number;
  /** Unix seconds. */
  nowSeconds: () => number;
  /** The clock a secret's retire time is compared with; absent: nowSeconds, to the second. */
  nowMs?: () => number;
  publisher: EventPublisher;
  metrics: IngressMetrics;
  logger: Logger;
  /** When enabled: a server span per request (continuing the provider's traceparent), verify and publish spans. */
  tracing: Tracing;
  /** The events topic (span names and attributes). */
  topic: string;
  /** Each source's requests and bytes per second on this ingress (verified requests only). */
  limiter: SourceLimiter;
  /** Told of each verified request: which secret verified it (sources from Postgres record it). */
  onVerified?: (sourceId: string, secretId: string) => void;
}

const INTERNAL_ERROR: Rejection = { kind: 'internal_error' };

/**
 * `POST /webhooks/:source` on node:http's request and response: runs the pipeline steps in order
 * (preflight, body read, verify, parse and match, publish), answers, logs one line and counts it.
 * The steps themselves know nothing of HTTP objects.
 */
export class WebhookHandler {
  /** Set when shutdown starts: new requests are answered 503 and every answer closes its connection. */
  closing = false;
  private activeCount = 0;
  private idle: (() => void) | undefined;
  private readonly options: WebhookHandlerOptions;
  private readonly preflightOptions: PreflightOptions;
  private readonly parseOptions: ParseEventOptions;
  private readonly retryAfter: string;
  private readonly requestLog: Logger;

  constructor(options: WebhookHandlerOptions) {
    this.options = options;
    this.preflightOptions = { sources: options.sources, bodyLimitBytes: options.bodyLimitBytes };
    this.parseOptions = { maxDepth: options.maxJsonDepth };
    this.retryAfter = String(options.retryAfterSeconds);
    // The per-request line carries only the fields built in respond() (ids, status, reason,
    // latency, digest), none of which the redaction paths (secret, signature, body) can match, so
    // this child skips the redaction pass (a large share of each line's cost).
    this.requestLog = options.logger.child({ component: 'request' }, { redact: [] });
  }

  /** Requests being handled right now (read, verified or waiting for their ack). */
  get active(): number {
    return this.activeCount;
  }

  /** Resolves once no request is in flight, or after timeoutMs. */
  async whenIdle(timeoutMs: number): Promise<void> {
    if (this.activeCount === 0) return;
    await Promise.race([
      new Promise<void>((resolve) => {
        this.idle = resolve;
      }),
      new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref()),
    ]);
  }

  handle(req: IncomingMessage, res: ServerResponse, sourceId: string): void {
    void this.run(req, res, sourceId);
  }

  private async run(req: IncomingMessage, res: ServerResponse, sourceId: string): Promise<void> {
    const started = performance.now();
    const receivedAt = new Date();
    this.activeCount += 1;
    // Only with tracing on: off, the request path builds no span, context or header.
    const span = this.options.tracing.enabled ? this.startRequestSpan(req, sourceId) : undefined;
    try {
      const answer = await this.decide(req, sourceId, receivedAt, span);
      if (answer) this.respond(req, res, sourceId, started, answer, span);
      else this.requestLog.info({ source: this.options.sources.label(sourceId), reason: 'client_aborted' }, 'webhook');
    } catch (error) {
      this.options.logger.error({ err: error, source: sourceId }, 'unexpected error handling a webhook');
      if (!res.headersSent) this.respond(req, res, sourceId, started, rejectionAnswer(INTERNAL_ERROR), span);
    } finally {
      span?.end();
      releaseBody(req, this.options.budget);
      this.activeCount -= 1;
      if (this.activeCount === 0) this.idle?.();
    }
  }

  /** The request's server span: a child of the provider's span when it sent a W3C traceparent. */
  private startRequestSpan(req: IncomingMessage, sourceId: string): Span {
    const tracing = this.options.tracing;
    const traceparent = req.headers.traceparent;
    const tracestate = req.headers.tracestate;
    const parent =
      typeof traceparent === 'string'
        ? tracing.extract({ traceparent, tracestate: typeof tracestate === 'string' ? tracestate : undefined })
        : undefined;
    return tracing.startSpan(
      'POST /webhooks/:source',
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': 'POST',
          'http.route': '/webhooks/:source',
          'bridge.source': this.options.sources.label(sourceId),
        },
      },
      parent,
    );
  }

  /** The answer the pipeline gives this request; undefined when the client went away before its body was in. */
  private async decide(req: IncomingMessage, sourceId: string, receivedAt: Date, span: Span | undefined): Promise<Answer | undefined> {
    const options = this.options;
    const delivery = preflight(this.preflightOptions, sourceId, req.headersDistinct, req.complete, this.closing);
    if ('kind' in delivery) return this.reject(delivery, sourceId);
    // Bytes are taken from the budget as they arrive (run() gives them back).
    const read = await readRawBody(req, options.bodyLimitBytes, options.budget, options.bodyDeadlines);
    if (read.kind !== 'ok') {
      const refused = bodyRejection(read);
      return refused === undefined ? undefined : this.reject(refused, sourceId);
    }
    const verifySpan = span && options.tracing.startSpan('verify', { kind: SpanKind.INTERNAL }, options.tracing.contextOf(span));
    const verified = verify(delivery, read.body, options.nowSeconds, options.metrics, options.nowMs);
    if (verifySpan) endStep(verifySpan, 'kind' in verified ? verified.kind : undefined);
    if ('kind' in verified) return this.reject(verified, sourceId);
    options.onVerified?.(delivery.source.id, verified.secretId);
    const limited = options.limiter.take(delivery.source, read.body.length);
    if (limited) return this.reject(limited, sourceId);
    const event = parseAndMatch(delivery, verified, read.body, receivedAt, this.parseOptions);
    if ('kind' in event) return this.reject(event, sourceId);
    if (span === undefined) {
      const refused = await publish(options.publisher, event, read.body);
      return refused === undefined ? acceptedAnswer(event) : this.reject(refused, sourceId);
    }
    // The producer span's context travels in the record headers: the worker's apply continues it.
    const publishSpan = options.tracing.startSpan(
      `send ${options.topic}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: {
          'messaging.system': 'kafka',
          'messaging.operation.type': 'send',
          'messaging.destination.name': options.topic,
          'bridge.event_id': event.eventId,
        },
      },
      options.tracing.contextOf(span),
    );
    const refused = await publish(options.publisher, { ...event, ...options.tracing.inject(publishSpan) }, read.body);
    endStep(publishSpan, refused?.kind);
    return refused === undefined ? acceptedAnswer(event) : this.reject(refused, sourceId);
  }

  private reject(rejection: Rejection, sourceId: string): Answer {
    countRejection(this.options.metrics, rejection, this.options.sources.label(sourceId));
    return rejectionAnswer(rejection);
  }

  private respond(req: IncomingMessage, res: ServerResponse, sourceId: string, started: number, answer: Answer, span?: Span): void {
    res.writeHead(answer.status, answerHeaders(answer, this.retryAfter, this.closing)).end(answer.body);
    if (answer.closeConnection && !req.complete) {
      // The unread rest of the body would otherwise be read and discarded up to requestTimeout.
      res.once('finish', () => req.socket.destroySoon());
    }
    const latencyMs = performance.now() - started;
    const metrics = this.options.metrics;
    const source = this.options.sources.label(sourceId);
    const status = String(answer.status);
    const event = answer.event;
    metrics.requests.inc({ source, event_type: event?.typeLabel ?? 'unknown', status });
    metrics.requestDuration.observe({ status }, latencyMs / 1000);
    const line = {
      event_id: event?.eventId,
      source,
      tenant: event?.tenant,
      resource: event?.resource,
      status: answer.status,
      reason: answer.reason,
      delivery_attempt: event?.deliveryAttempt,
      latency_ms: Math.round(latencyMs * 100) / 100,
      body_sha256: answer.bodySha256,
      trace_id: span?.spanContext().traceId,
    };
    if (span) {
      span.setAttribute('http.response.status_code', answer.status);
      span.setAttribute('bridge.reason', answer.reason);
      if (answer.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    if (answer.status >= 500) this.requestLog.warn(line, 'webhook');
    else this.requestLog.info(line, 'webhook');
  }
}

/** Ends a pipeline step's span, failed with the rejection's kind when there is one. */
function endStep(span: Span, rejection: string | undefined): void {
  if (rejection !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: rejection });
  span.end();
}
