import http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { Registry } from 'prom-client';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import { startAdminServer } from '#plumbing/observability/admin-server.ts';
import { TRACING_OFF, type Tracing } from '#plumbing/observability/tracing.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { LiveSources, type WebhookSource } from '#domain/sources/index.ts';
import { clientConnectionShare, ingressDefaults, type IngressConfig } from './config.ts';
import { BodyBudget, ConnectionShare } from './http-input.ts';
import { createIngressMetrics, type IngressMetrics } from './metrics.ts';
import { errorBody } from './pipeline/answer.ts';
import { SourceLimiter } from './pipeline/limit.ts';
import { SourceDirectory } from './pipeline/preflight.ts';
import { REJECTIONS } from './pipeline/rejections.ts';
import { BatchingPublisher } from './publisher.ts';
import { WebhookHandler } from './webhook-handler.ts';
import { ListenerGroup } from './listeners.ts';

export interface IngressDeps {
  logger?: Logger;
  registry?: Registry;
  kafka?: Kafka;
  /** Unix seconds; tests move the clock to exercise the timestamp window. */
  nowSeconds?: () => number;
  /** OpenTelemetry (main.ts builds it from the OTEL_* variables); off by default. */
  tracing?: Tracing;
}

export interface IngressHandle {
  url: string;
  adminUrl: string;
  port: number;
  adminPort: number;
  registry: Registry;
  /** Broker reachable, sources loaded and accepting requests (what /readyz reports). */
  ready: () => boolean;
  /** The sources configuration version served: -1 before the first load from Postgres, 0 from the file. */
  configVersion: () => number;
  /** Requests being handled right now (read, verified or waiting for their ack). */
  activeRequests: () => number;
  /** Stops accepting, answers in-flight requests after their acks, flushes, disconnects. */
  close: () => Promise<void>;
}

// What express's `POST /webhooks/:source` (case-insensitive, optional trailing slash, query
// ignored) matches, minus percent-encoded sources, which express decodes and this leaves to it.
const WEBHOOK_PATH = /^\/webhooks\/([^/?#%]+)\/?(?:\?|$)/i;

export async function startIngress(config: IngressConfig, deps: IngressDeps = {}): Promise<IngressHandle> {
  const settings = { ...ingressDefaults, ...stripUndefined(config) };
  const logger = deps.logger ?? createLogger({ name: 'ingress', level: config.logLevel });
  const registry = deps.registry ?? new Registry();
  const budget = new BodyBudget(settings.maxInflightBodyBytes, settings.maxClientBodyBytes);
  const fromPostgres = config.sourcesFromPostgres;
  let live: LiveSources | undefined;
  // The listening sockets come later, once the handler they serve exists; until then none is open.
  const open = { connections: () => 0 };
  const metrics = createIngressMetrics(registry, {
    inflightBodyBytes: () => budget.usedBytes,
    openConnections: () => open.connections(),
    config: () => (live ? { version: live.version, healthy: live.healthy } : { version: 0, healthy: true }),
  });
  for (const reason of OVERLOAD_REASONS) metrics.overloadRefusals.inc({ reason }, 0);
  const nowSeconds = deps.nowSeconds ?? (() => Math.floor(Date.now() / 1000));
  const kafka = deps.kafka ?? createKafka({ brokers: config.brokers, clientId: config.clientId ?? 'ingress', logger });
  const sources = new SourceDirectory(fromPostgres ? [] : config.sources, { loaded: fromPostgres === undefined });
  const limiter = new SourceLimiter(settings.bodyLimitBytes);
  const showRetirements = (served: readonly WebhookSource[]) => {
    metrics.secretRetireAfter.reset();
    for (const source of served) {
      for (const secret of source.secrets) {
        if (secret.retireAfter)
          metrics.secretRetireAfter.set({ source: source.id, secret_id: secret.id }, secret.retireAfter.getTime() / 1000);
      }
    }
  };
  showRetirements(fromPostgres ? [] : config.sources);
  const configPool =
    fromPostgres && createPool({ url: fromPostgres.databaseUrl, max: 2, applicationName: 'bridge-ingress-config', logger });
  if (fromPostgres && configPool) {
    live = new LiveSources({
      pool: configPool,
      databaseUrl: fromPostgres.databaseUrl,
      keyring: fromPostgres.keyring,
      logger,
      role: 'ingress',
      pollMs: fromPostgres.pollMs,
      reportMs: fromPostgres.reportMs,
      onSnapshot: (snapshot) => {
        sources.replace(snapshot.sources);
        limiter.retain(new Set(snapshot.sources.map((s) => s.id)));
        showRetirements(snapshot.sources);
      },
    });
  }

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
  const webhooks = new WebhookHandler({
    sources,
    bodyLimitBytes: settings.bodyLimitBytes,
    budget,
    bodyDeadlines: { idleMs: settings.bodyIdleTimeoutMs, totalMs: settings.bodyTimeoutMs },
    maxJsonDepth: settings.maxJsonDepth,
    retryAfterSeconds: settings.retryAfterSeconds,
    nowSeconds,
    // A retire time holds to the millisecond on the real clock; an injected clock is used whole.
    ...(deps.nowSeconds === undefined ? { nowMs: Date.now } : {}),
    publisher,
    metrics,
    logger,
    tracing: deps.tracing ?? TRACING_OFF,
    topic: config.topic,
    limiter,
    ...(live ? { onVerified: (sourceId: string, secretId: string) => live.noteUse(sourceId, secretId) } : {}),
  });

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post('/webhooks/:source', (req: Request<{ source: string }>, res: Response) => webhooks.handle(req, res, req.params.source));
  app.use((_req: Request, res: Response) => {
    res.status(REJECTIONS.not_found.status).json({ error: REJECTIONS.not_found.code });
  });
  app.use((error: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
    const status = error.status && error.status >= 400 && error.status < 500 ? error.status : 500;
    if (status === 500) logger.error({ err: error }, 'unexpected error');
    res.status(status).json({ error: status === 500 ? 'internal_error' : 'bad_request' });
  });

  const retryAfter = String(settings.retryAfterSeconds);
  const connectionShare = new ConnectionShare(
    settings.maxClientConnections ?? clientConnectionShare(settings.maxConnections),
    REFUSALS_PER_CLIENT,
  );
  const refusalGraceMs = Math.min(settings.headersTimeoutMs, REFUSAL_GRACE_MS);
  const group: ListenerGroup = new ListenerGroup(
    {
      port: config.port,
      host: config.host ?? '0.0.0.0',
      sockets: settings.listenSockets,
      maxConnections: settings.maxConnections,
      onDrop: () => metrics.overloadRefusals.inc({ reason: 'max_connections' }),
    },
    () => {
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
          if (ConnectionShare.refused(req.socket)) {
            refuseOverShare(req, res, retryAfter);
            return;
          }
          // The hot route skips express's router; the handler uses only node:http's request and
          // response. Anything the pattern does not take as is (percent-encoded source, other
          // methods and paths) goes through express, which answers it exactly as before.
          const match = req.method === 'POST' ? WEBHOOK_PATH.exec(req.url ?? '') : null;
          if (match) webhooks.handle(req, res, match[1]!);
          else app(req, res);
        },
      );
      server.maxHeadersCount = 100;
      server.on('connection', (socket: Socket) => {
        // Over MAX_CONNECTIONS the group closes the new connection as soon as it is accepted (no
        // answer is possible without reading a request from it).
        if (!group.admit(socket)) return;
        const admission = connectionShare.admit(socket);
        if (admission === 'admitted') return;
        metrics.overloadRefusals.inc({ reason: 'client_connections' });
        if (admission === 'closed') {
          socket.destroy();
          return;
        }
        // A refusal holds a slot only as long as a client with a request ready needs to send it.
        const grace = setTimeout(() => socket.destroy(), refusalGraceMs);
        grace.unref();
        socket.once('close', () => clearTimeout(grace));
      });
      server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => answerClientError(error, socket, metrics));
      return server;
    },
  );
  open.connections = () => group.openConnections;
  await group.listen();
  const port = group.port;

  const admin = await startAdminServer({
    port: config.adminPort,
    host: config.adminHost,
    registry,
    logger,
    // publisher.status says why the broker is unavailable: the admin server logs it, never answers it.
    ready: async () => ({
      ready: !webhooks.closing && publisher.available && sources.loaded,
      checks: {
        broker: publisher.available || publisher.status,
        accepting: !webhooks.closing,
        // Sources from Postgres only: from the file they are loaded before the port opens.
        ...(fromPostgres ? { sources: sources.loaded || 'no sources loaded from Postgres yet' } : {}),
      },
    }),
  }).catch(async (error: unknown) => {
    await group.close();
    await publisher.close();
    await configPool?.end().catch(() => {});
    throw error;
  });

  // Not awaited: start() retries until Postgres answers, logging each failure, while the port
  // answers 503 and readiness says why.
  void live?.start().catch((error: unknown) => logger.error({ err: error }, 'sources: live loading stopped'));

  // Listening before the first broker probe: /readyz answers (false) while the broker or the
  // topic is missing, instead of the port staying closed.
  await publisher.start();

  const displayHost = (host: string | undefined) => (host === undefined || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host);
  logger.info(
    {
      port,
      listenSockets: group.sockets,
      adminPort: admin.port,
      topic: config.topic,
      sourcesFrom: fromPostgres ? 'postgres' : 'file',
      sources: sources.ids,
    },
    'ingress listening',
  );

  let closed: Promise<void> | undefined;
  async function shutdown(): Promise<void> {
    webhooks.closing = true;
    const serverClosed = group.close();
    group.closeIdleConnections();
    // In-flight requests still get their ack (or their 503) before the producer goes away.
    await webhooks.whenIdle(settings.ackTimeoutMs + 2000);
    // After the drain, so the last requests' secret uses are written.
    // A first load still retrying ends at its next attempt; nothing waits for it.
    await live?.stop();
    await configPool?.end().catch(() => {});
    await publisher.close();
    group.closeIdleConnections();
    const forced = setTimeout(() => group.closeAllConnections(), 1000);
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
    ready: () => !webhooks.closing && publisher.available && sources.loaded,
    configVersion: () => (live ? live.version : 0),
    activeRequests: () => webhooks.active,
    close: () => (closed ??= shutdown()),
  };
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export type { IngressMetrics };

/** Every reason webhook_overload_refusals_total counts, exported at 0 from the start. */
const OVERLOAD_REASONS = [
  'max_connections',
  'client_connections',
  'inflight_body_bytes',
  'client_body_bytes',
  'headers_timeout',
  'request_timeout',
  'body_idle_timeout',
  'body_timeout',
] as const;

/**
 * Connections past a client's share that are let in to be answered 429 at once; more than this
 * many waiting at a time from one client are closed at accept.
 */
const REFUSALS_PER_CLIENT = 8;
/** How long such a connection may take to send its request before it is closed unanswered. */
const REFUSAL_GRACE_MS = 2000;
const OVER_SHARE_BODY = errorBody('too_many_requests');

/**
 * The answer on a connection past its client's share, whatever the request: the client address
 * holds its share of connections, its own doing, so 429 as for its share of body bytes. The body
 * is never read and the connection closes once the answer is out.
 */
function refuseOverShare(req: http.IncomingMessage, res: http.ServerResponse, retryAfter: string): void {
  res
    .writeHead(429, { 'content-type': 'application/json', 'cache-control': 'no-store', 'retry-after': retryAfter, connection: 'close' })
    .end(OVER_SHARE_BODY);
  if (!req.complete) res.once('finish', () => req.socket.destroySoon());
}

const CLIENT_ERROR_ANSWERS: Readonly<Record<string, string>> = {
  ERR_HTTP_REQUEST_TIMEOUT: 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n',
  HPE_HEADER_OVERFLOW: 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
};
const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';

/**
 * node:http's own answer to a client error (what it does without a listener), plus the count of
 * its timeouts: headersTimeout when the headers never ended, requestTimeout when a request that
 * got in did not finish (the body deadlines normally answer first).
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex, metrics: IngressMetrics): void {
  // node:http attaches a response to the socket once a request's headers are in, until it is sent.
  const response = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage ?? undefined;
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    metrics.overloadRefusals.inc({ reason: response === undefined ? 'headers_timeout' : 'request_timeout' });
  if (socket.writable && (response === undefined || !response.headersSent))
    socket.write(CLIENT_ERROR_ANSWERS[error.code ?? ''] ?? BAD_REQUEST);
  socket.destroy(error);
}
