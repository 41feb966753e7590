// The operator console: server-rendered pages over the store and the broker, one express app.
// Reads are open on loopback (behind a sign-in beyond it); actions go through the OperatorGuard
// (operator token, session, CSRF, Origin) and are logged with who did what. This file sets up the
// server, the guard and the middleware every page shares; each page's routes are a router in
// routes/, its HTML is rendered in pages/.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import type http from 'node:http';
import express from 'express';
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import type pg from 'pg';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import type { ConsoleConfig } from './config.ts';
import { query } from './html.ts';
import { consoleMetrics } from './metrics.ts';
import { allowedHostNames, hostNameOf, OperatorGuard, SignInThrottle } from './guard.ts';
import { loadDlqExpiry, type ConsoleClients } from './readers.ts';
import { routeContext } from './routes/context.ts';
import { dlqRoutes } from './routes/dlq.ts';
import { overviewRoutes } from './routes/overview.ts';
import { followLiveReconcileSources, reconcileRoutes, reconcileSetup } from './routes/reconcile.ts';
import { resourceRoutes } from './routes/resource.ts';
import { searchRoutes } from './routes/search.ts';
import { signInRoutes } from './routes/sign-in.ts';
import { sourcesRoutes } from './routes/sources.ts';
import { API_PREFIX, operatorApi } from './api/api.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
// The charting library is served from node_modules by the console itself: no CDN.
const uplotDir = path.dirname(require.resolve('uplot/dist/uPlot.iife.min.js'));
const ASSETS: Record<string, string> = {
  'uPlot.iife.min.js': path.join(uplotDir, 'uPlot.iife.min.js'),
  'uPlot.min.css': path.join(uplotDir, 'uPlot.min.css'),
  'console.js': path.join(here, 'assets', 'console.js'),
  'console.css': path.join(here, 'assets', 'console.css'),
};

export interface ConsoleHandle {
  url: string;
  port: number;
  close: () => Promise<void>;
}

export function createClients(config: ConsoleConfig, logger: Logger): ConsoleClients & { close: () => Promise<void> } {
  const pool: pg.Pool = createPool({
    url: config.databaseUrl,
    max: 4,
    statementTimeoutMs: config.statementTimeoutMs,
    applicationName: 'bridge-console',
  });
  // An idle connection dropped by the server must not crash the console: the next page says so.
  pool.on('error', (error) => logger.warn({ err: error }, 'idle Postgres connection failed'));
  const kafka: Kafka = createKafka({
    brokers: config.brokers,
    clientId: 'bridge-console',
    logger,
    // A page waits on this: fail fast and say so instead of retrying for a minute.
    connectionTimeoutMs: 2000,
    retries: 1,
  });
  const withAdmin = async <T>(fn: (admin: Admin) => Promise<T>): Promise<T> => {
    const admin = kafka.admin();
    await admin.connect();
    try {
      return await fn(admin);
    } finally {
      await admin.disconnect().catch(() => {});
    }
  };
  return { pool, kafka, withAdmin, logger, close: () => pool.end() };
}

export async function startConsole(
  config: ConsoleConfig,
  deps: { logger?: Logger; clients?: ConsoleClients; env?: Record<string, string | undefined> } = {},
): Promise<ConsoleHandle> {
  const logger = deps.logger ?? createLogger({ name: 'console', level: config.logLevel });
  const owned = deps.clients ? undefined : createClients(config, logger);
  const clients = deps.clients ?? owned!;
  const guard = new OperatorGuard(config.operatorToken);
  const throttle = new SignInThrottle();
  // Expired sessions and forgotten sign-in failures leave memory even when nobody signs in.
  const sweeper = setInterval(() => {
    guard.sweep();
    throttle.sweep();
  }, 60_000);
  sweeper.unref();
  const hostNames = allowedHostNames(config.host, config.allowedHosts ?? []);
  const signInToRead = config.signInToRead ?? false;
  const reconcile = reconcileSetup(config, clients, deps.env ?? process.env);
  if (!reconcile.ok) logger.info({ reason: reconcile.why }, 'reconcile from the resource page is unavailable');
  const liveSources = followLiveReconcileSources(config, clients, reconcile, deps.env ?? process.env);
  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => void res.json({ ok: true }));
  // Counts only, no event data: open to a scraper, whatever Host it uses.
  const metrics = consoleMetrics(() => loadDlqExpiry(clients, config));
  app.get('/metrics', (_req, res) => {
    metrics
      .metrics()
      .then((text) => void res.type(metrics.contentType).send(text))
      .catch((error: unknown) => {
        logger.error({ err: error }, 'metrics failed');
        res.status(500).end();
      });
  });
  app.use((req, res, next) => {
    const name = hostNameOf(req.headers.host);
    if (name === undefined) return void res.status(400).type('text').send('a Host header is required\n');
    if (!hostNames.has(name)) {
      logger.warn({ host: req.headers.host, path: req.path }, 'request for a host this console is not known by: refused');
      return void res.status(421).type('text').send(`this console does not answer to the host name ${name} (CONSOLE_ALLOWED_HOSTS)\n`);
    }
    next();
  });
  app.use(express.urlencoded({ extended: false, limit: '256kb' }));
  app.use((_req, res, next) => {
    // Pages carry only this console's own script; nothing may frame them (clickjacking an action).
    res.set({
      'content-security-policy':
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
      'x-frame-options': 'DENY',
      'referrer-policy': 'same-origin',
      'x-content-type-options': 'nosniff',
    });
    next();
  });

  const pages = routeContext(config, clients, logger, guard);

  app.get('/assets/:name', (req, res) => {
    const file = ASSETS[req.params.name];
    if (!file) return void res.status(404).end();
    res.sendFile(file, { maxAge: 60_000 });
  });

  // Before the sign-in gate: the operator API authenticates each request with a token of its own.
  app.use(API_PREFIX, operatorApi({ pool: clients.pool, keyring: config.secretKeyring, logger, throttle }));

  // Reading needs a session too when the console is reachable beyond this machine (or so configured).
  // Every method, not only GET: Express answers HEAD with the GET handlers (the status and length
  // tell what a page holds, after running its queries) and OPTIONS by itself. Actions keep the
  // guard's own checks behind this one.
  app.use((req, res, next) => {
    if (!signInToRead || req.path === '/sign-in' || req.path.startsWith('/assets/')) return next();
    if (pages.sessionOf(req)) return next();
    const back = req.method === 'GET' || req.method === 'HEAD' ? query({ next: req.originalUrl }) : '';
    res.redirect(303, `/sign-in${back}`);
  });

  // One router per page; no two of them answer the same path.
  app.use(overviewRoutes(pages));
  app.use(resourceRoutes(pages, reconcile));
  app.use(searchRoutes(pages));
  app.use(dlqRoutes(pages));
  app.use(signInRoutes(pages, throttle));
  app.use(reconcileRoutes(pages, reconcile));
  app.use(sourcesRoutes(pages));

  const server: http.Server = await new Promise((resolve, reject) => {
    const s = app.listen(config.port, config.host, (error?: Error) => (error ? reject(error) : resolve(s)));
  });
  const port = (server.address() as AddressInfo).port;
  const hostForUrl = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${hostForUrl === '0.0.0.0' ? '127.0.0.1' : hostForUrl}:${port}`;
  logger.info(
    {
      url,
      actions: guard.actionsEnabled ? 'enabled' : 'disabled (no CONSOLE_OPERATOR_TOKEN)',
      sign_in_to_read: signInToRead,
      host_names: [...hostNames],
    },
    'console listening',
  );
  return {
    url,
    port,
    close: async () => {
      clearInterval(sweeper);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await liveSources?.stop();
      if (reconcile.ok) await reconcile.reconciler.close();
      await owned?.close();
    },
  };
}
