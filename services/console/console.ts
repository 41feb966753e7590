// The operator console: server-rendered pages over the store and the broker, one express app.
// Reads are open; actions go through the OperatorGuard (operator token, session, CSRF, Origin)
// and are logged with who did what.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import type http from 'node:http';
import express, { type Request, type Response } from 'express';
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import type pg from 'pg';
import { inboxKeyOf, latestPerEvent, type DlqEntry } from '#domain/operations/dlq-records.ts';
import { inboxStatuses, replayDeadLetters, replayPlan } from '#domain/operations/dlq-replay/index.ts';
import { parseCursor } from '#domain/operations/dlq-window.ts';
import { selectPulls } from '#domain/store/reconcile-pulls.ts';
import {
  createEventsPublisher,
  createOnDemandReconciler,
  isNotConfigured,
  reconcileSourcesFor,
  type OnDemandReconciler,
  type ReconcileReport,
} from '#domain/reconcile/index.ts';
import { loadReconcileSources, SourcesConfigError } from '#domain/sources/index.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import type { ConsoleConfig } from './config.ts';
import { query } from './html.ts';
import { consoleMetrics } from './metrics.ts';
import {
  allowedHostNames,
  hostNameOf,
  isRefusal,
  OperatorGuard,
  safeNextPath,
  SESSION_COOKIE,
  sessionIdFrom,
  SignInThrottle,
  type Session,
} from './guard.ts';
import { dlqListPage, dlqRecordPage, parseFilter, replayPreviewPage, replayResultPage, type DlqFilterText } from './pages/dlq.ts';
import type { PageContext } from './pages/layout.ts';
import { overviewPage } from './pages/overview.ts';
import {
  reconcilePreviewPage,
  reconcilePullsPage,
  reconcileResultPage,
  type ReconcileAvailability,
  type ReconcileTarget,
} from './pages/reconcile.ts';
import { resourcePage } from './pages/resource.ts';
import { refusedPage, searchPage, signInPage } from './pages/search.ts';
import {
  loadDlqExpiry,
  loadDlqPage,
  loadDlqRecords,
  loadOverview,
  loadResource,
  search,
  waitForInboxOutcome,
  type ConsoleClients,
} from './readers.ts';

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

/** How long a replay from the page waits for outcomes before it answers. */
const REPLAY_WAIT_MS = 30_000;
/** Replay of all that match a filter: at most this many records, found reading at most this many. */
const REPLAY_BY_FILTER = { limit: 1000, scanBudget: 20_000 } as const;
/** How long a reconcile from the page waits for the worker to settle the published event. */
const RECONCILE_WAIT_MS = 30_000;

/** The console's on-demand reconciler (as `bridge reconcile`'s), or why there is none. */
export type ReconcileSetup = { ok: true; reconciler: OnDemandReconciler; file: string } | { ok: false; why: string };

/** Finds the sources the way the CLI does: WEBHOOK_SOURCES_FILE, loadReconcileSources (auth values from env). */
export function reconcileSetup(config: ConsoleConfig, clients: ConsoleClients, env: Record<string, string | undefined>): ReconcileSetup {
  const file = config.sourcesFile;
  if (!file) return { ok: false, why: "WEBHOOK_SOURCES_FILE is not set (the sources file with each source's `reconcile` settings)" };
  try {
    const sources = loadReconcileSources(file, env);
    const reconciler = createOnDemandReconciler({
      pool: clients.pool,
      sources,
      openPublisher: () => createEventsPublisher(clients.kafka, { topic: config.names.events, logger: clients.logger }),
    });
    return { ok: true, reconciler, file };
  } catch (error) {
    if (error instanceof SourcesConfigError) return { ok: false, why: `the sources file cannot be used: ${error.message}` };
    throw error;
  }
}

export function reconcileAvailability(setup: ReconcileSetup, tenant: string, type: string): ReconcileAvailability {
  if (!setup.ok) return setup;
  const owners = reconcileSourcesFor(setup.reconciler.sources, tenant, type);
  if (owners.length === 0)
    return { ok: false, why: `no source in ${setup.file} has \`reconcile\` settings for tenant "${tenant}" and type "${type}"` };
  return { ok: true, sources: owners.map((s) => s.id) };
}

const reportLog = (r: ReconcileReport) => ({
  outcome: r.outcome,
  source: r.source,
  fetched: r.fetched ? { status: r.fetched.status, version: r.fetched.version } : undefined,
  stored_version: r.storedVersion,
  event_id: r.event?.event_id,
  published: r.published,
  reason: r.reason,
});

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function list(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return typeof value === 'string' ? [value] : [];
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
  const scheme = config.https ? 'https' : 'http';
  const reconcile = reconcileSetup(config, clients, deps.env ?? process.env);
  if (!reconcile.ok) logger.info({ reason: reconcile.why }, 'reconcile from the resource page is unavailable');
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

  // The origin the browser used to reach this page: a POST must come from it (an Origin check).
  const ownOrigin = (req: Request) => `${scheme}://${req.headers.host ?? ''}`;
  const sessionOf = (req: Request): Session | undefined => guard.session(sessionIdFrom(req.headers.cookie));
  const ctxOf = (req: Request): PageContext => {
    const s = sessionOf(req);
    return { operator: s?.operator, csrf: s?.csrf, actionsEnabled: guard.actionsEnabled, path: req.path };
  };
  const send = (res: Response, body: string, status = 200) => res.status(status).type('html').send(body);
  const originOf = (req: Request) => req.headers.origin ?? req.headers.referer;
  const authorize = (req: Request) =>
    guard.authorize({
      sessionId: sessionIdFrom(req.headers.cookie),
      csrf: (req.body as Record<string, unknown>)?.csrf,
      origin: originOf(req),
      expectedOrigin: ownOrigin(req),
    });

  const route = (fn: (req: Request, res: Response) => Promise<void>) => (req: Request, res: Response) => {
    fn(req, res).catch((error: unknown) => {
      logger.error({ err: error, path: req.path }, 'page failed');
      if (!res.headersSent) send(res, refusedPage(ctxOf(req), `This page failed: ${(error as Error).message}`), 500);
    });
  };

  app.get('/assets/:name', (req, res) => {
    const file = ASSETS[req.params.name];
    if (!file) return void res.status(404).end();
    res.sendFile(file, { maxAge: 60_000 });
  });

  // Reading needs a session too when the console is reachable beyond this machine (or so configured).
  app.use((req, res, next) => {
    if (!signInToRead || req.method !== 'GET' || req.path === '/sign-in' || req.path.startsWith('/assets/')) return next();
    if (sessionOf(req)) return next();
    res.redirect(303, `/sign-in${query({ next: req.originalUrl })}`);
  });

  app.get(
    '/',
    route(async (req, res) => void send(res, overviewPage(ctxOf(req), await loadOverview(clients, config)))),
  );

  app.get(
    '/resource',
    route(async (req, res) => {
      const q = {
        tenant: text(req.query.tenant),
        type: text(req.query.type),
        id: text(req.query.id),
        a: text(req.query.a),
        b: text(req.query.b),
      };
      const view =
        q.tenant && q.type && q.id
          ? await loadResource(clients, { tenant_id: q.tenant, resource_type: q.type, resource_id: q.id })
          : undefined;
      send(res, resourcePage(ctxOf(req), q, view, q.tenant && q.type ? reconcileAvailability(reconcile, q.tenant, q.type) : undefined));
    }),
  );

  app.get(
    '/search',
    route(async (req, res) => {
      const term = text(req.query.q)?.trim() ?? '';
      send(res, searchPage(ctxOf(req), term, term ? await search(clients, term) : undefined));
    }),
  );

  const filterTextOf = (source: Record<string, unknown>, prefix = ''): DlqFilterText => ({
    reason: text(source[`${prefix}reason`]),
    source: text(source[`${prefix}source`]),
    tenant: text(source[`${prefix}tenant`]),
    since: text(source[`${prefix}since`]),
    until: text(source[`${prefix}until`]),
  });

  app.get(
    '/dlq',
    route(async (req, res) => {
      const filterText = filterTextOf(req.query as Record<string, unknown>);
      const { filter, error } = parseFilter(filterText);
      const beforeText = text(req.query.before);
      const before = beforeText === undefined ? undefined : parseCursor(beforeText);
      if (error || (beforeText !== undefined && before === undefined)) {
        const problem = error ?? 'before must be partition:offset pairs, as the Older link gives';
        return void send(res, dlqListPage(ctxOf(req), filterText, undefined, config.names.dlq, problem), 400);
      }
      const view = await loadDlqPage(clients, config, filter, before);
      send(res, dlqListPage(ctxOf(req), filterText, view, config.names.dlq));
    }),
  );

  app.get(
    '/dlq/record',
    route(async (req, res) => {
      const refText = text(req.query.ref) ?? '';
      const [view, expiry] = await Promise.all([loadDlqRecords(clients, config, [refText]), loadDlqExpiry(clients, config)]);
      send(res, dlqRecordPage(ctxOf(req), refText, view, expiry), view.entries.ok && view.entries.value.length === 0 ? 404 : 200);
    }),
  );

  app.get('/sign-in', (req, res) => send(res, signInPage(ctxOf(req), undefined, text(req.query.next) ?? '/')));

  app.post('/sign-in', (req, res) => {
    const body = req.body as Record<string, unknown>;
    const address = req.socket.remoteAddress ?? '';
    const wait = throttle.retryAfterSeconds(address);
    if (wait > 0) {
      logger.warn({ action: 'sign-in', operator: text(body.operator), address, refused: 'throttled' }, 'console sign-in refused');
      res.set('retry-after', String(wait));
      return send(res, signInPage(ctxOf(req), `Too many failed sign-ins from your address: try again in ${wait} s.`), 429);
    }
    // A sign-in from another site would plant its own session (login CSRF): same origin only.
    const origin_ = guard.actionsEnabled ? checkSameOrigin(originOf(req), ownOrigin(req)) : undefined;
    if (origin_) return send(res, signInPage(ctxOf(req), origin_), 403);
    const result = guard.signIn(text(body.operator) ?? '', text(body.token) ?? '');
    if (isRefusal(result)) {
      if (result.status === 401) throttle.failed(address);
      logger.warn({ action: 'sign-in', operator: text(body.operator), address, refused: result.reason }, 'console sign-in refused');
      return send(res, signInPage(ctxOf(req), result.reason), result.status);
    }
    logger.info({ action: 'sign-in', operator: result.operator }, 'operator signed in');
    res.cookie(SESSION_COOKIE, result.id, {
      httpOnly: true,
      sameSite: 'strict',
      path: '/',
      maxAge: 8 * 3600 * 1000,
      secure: config.https ?? false,
    });
    // Only a path on this console: never an open redirect.
    res.redirect(303, safeNextPath(text(body.next)));
  });
  const checkSameOrigin = (given: string | undefined, origin: string): string | undefined => {
    if (!given) return 'no Origin header: refused';
    try {
      return new URL(given).origin === origin ? undefined : 'request not from this console: refused';
    } catch {
      return 'unreadable Origin header: refused';
    }
  };

  app.post('/sign-out', (req, res) => {
    const session = authorize(req);
    if (!isRefusal(session)) {
      guard.signOut(session.id);
      logger.info({ action: 'sign-out', operator: session.operator }, 'operator signed out');
    }
    res.clearCookie(SESSION_COOKIE, { path: '/', secure: config.https ?? false });
    res.redirect(303, '/');
  });

  app.post(
    '/dlq/replay',
    route(async (req, res) => {
      const session = authorize(req);
      if (isRefusal(session)) {
        logger.warn({ action: 'dlq-replay', refused: session.reason }, 'console action refused');
        return void send(res, refusedPage(ctxOf(req), session.reason), session.status);
      }
      const body = req.body as Record<string, unknown>;
      const confirm = body.confirm === 'yes';
      let entries: DlqEntry[];
      if (body.scope === 'filter') {
        const { filter, error } = parseFilter(filterTextOf(body, 'filter_'));
        if (error) return void send(res, refusedPage(ctxOf(req), error), 400);
        // All that match in the time window, read at most to a bound: a wider window is narrowed first.
        const view = await loadDlqPage(clients, config, filter, undefined, REPLAY_BY_FILTER);
        if (!view.window.ok) return void send(res, refusedPage(ctxOf(req), view.window.problem), 503);
        if (view.window.value.next !== undefined)
          return void send(
            res,
            refusedPage(
              ctxOf(req),
              `More than ${REPLAY_BY_FILTER.limit} records match, or the time window holds more than ${REPLAY_BY_FILTER.scanBudget}: narrow since and until, or replay the selected records.`,
            ),
            400,
          );
        entries = view.window.value.entries;
      } else {
        const read = await loadDlqRecords(clients, config, list(body.ref));
        if (!read.entries.ok) return void send(res, refusedPage(ctxOf(req), read.entries.problem), 503);
        entries = read.entries.value;
      }
      const toReplay = latestPerEvent(entries);
      const plan = replayPlan(toReplay);
      const replayRefs = plan.map((p) => p.from);
      if (!confirm) {
        const statuses = await inboxStatuses(clients.pool, toReplay).catch(() => undefined);
        const byRef = new Map(
          toReplay.flatMap((e) => {
            const s = statuses?.get(inboxKeyOf(e) ?? '');
            return s ? [[`${e.partition}:${e.offset}`, s] as const] : [];
          }),
        );
        logger.info({ action: 'dlq-replay-preview', operator: session.operator, records: replayRefs }, 'replay previewed');
        return void send(res, replayPreviewPage(ctxOf(req), plan, replayRefs, byRef, config.names.events));
      }
      logger.info(
        { action: 'dlq-replay', operator: session.operator, records: replayRefs, event_ids: plan.map((p) => p.event_id) },
        'replay started',
      );
      const outcomes = await clients.withAdmin((admin) =>
        replayDeadLetters({ kafka: clients.kafka, admin, names: config.names, group: config.group, logger }, clients.pool, toReplay, {
          wait: true,
          timeoutMs: REPLAY_WAIT_MS,
        }),
      );
      logger.info(
        {
          action: 'dlq-replay',
          operator: session.operator,
          outcomes: outcomes.map((o) => ({ from: o.from, event_id: o.event_id, status: o.status })),
        },
        'replay done',
      );
      send(res, replayResultPage(ctxOf(req), outcomes));
    }),
  );

  app.get(
    '/reconcile',
    route(async (req, res) => {
      const [tenant, type, id] = [text(req.query.tenant), text(req.query.type), text(req.query.id)];
      const resource = tenant && type && id ? { tenant_id: tenant, resource_type: type, resource_id: id } : undefined;
      const rows = await selectPulls(clients.pool, { limit: 200, ...(resource ? { resource } : {}) });
      send(res, reconcilePullsPage(ctxOf(req), rows, resource !== undefined));
    }),
  );

  app.post(
    '/resource/reconcile',
    route(async (req, res) => {
      const body = req.body as Record<string, unknown>;
      const target: ReconcileTarget = { tenant: text(body.tenant) ?? '', type: text(body.type) ?? '', id: text(body.id) ?? '' };
      const source = text(body.source);
      if (source !== undefined) target.source = source;
      const asked = { resource: `${target.tenant}/${target.type}/${target.id}`, source };
      const session = authorize(req);
      if (isRefusal(session)) {
        logger.warn({ action: 'reconcile', ...asked, refused: session.reason }, 'console action refused');
        return void send(res, refusedPage(ctxOf(req), session.reason), session.status);
      }
      if (!target.tenant || !target.type || !target.id)
        return void send(res, refusedPage(ctxOf(req), 'give a tenant, a type and an id to reconcile'), 400);
      const availability = reconcileAvailability(reconcile, target.tenant, target.type);
      if (!availability.ok || !reconcile.ok) {
        const why = availability.ok ? 'reconcile is not configured' : availability.why;
        logger.warn({ action: 'reconcile', operator: session.operator, ...asked, refused: why }, 'console action refused');
        return void send(res, refusedPage(ctxOf(req), `No reconcile: ${why}`), 400);
      }
      const dryRun = body.confirm !== 'yes';
      const action = dryRun ? 'reconcile-preview' : 'reconcile';
      if (!dryRun) logger.info({ action, operator: session.operator, ...asked }, 'reconcile started');
      let report: ReconcileReport;
      try {
        report = await reconcile.reconciler.reconcile({
          tenantId: target.tenant,
          type: target.type,
          id: target.id,
          dryRun,
          ...(source === undefined ? {} : { sourceId: source }),
        });
      } catch (error) {
        if (!isNotConfigured(error)) throw error;
        logger.warn({ action, operator: session.operator, ...asked, refused: error.message }, 'console action refused');
        return void send(res, refusedPage(ctxOf(req), `No reconcile: ${error.message}`), 400);
      }
      if (dryRun) {
        logger.info({ action, operator: session.operator, ...asked, ...reportLog(report) }, 'reconcile previewed');
        return void send(res, reconcilePreviewPage(ctxOf(req), target, report));
      }
      const settled =
        report.published && report.event
          ? ((await waitForInboxOutcome(
              clients.pool,
              { tenant_id: target.tenant, event_id: report.event.event_id },
              RECONCILE_WAIT_MS,
            )) ?? {
              status: 'timeout' as const,
              reason: `not settled within ${RECONCILE_WAIT_MS} ms (is a worker running for group ${config.group}?)`,
            })
          : undefined;
      logger.info({ action, operator: session.operator, ...asked, ...reportLog(report), settled: settled?.status }, 'reconcile done');
      send(res, reconcileResultPage(ctxOf(req), target, report, settled));
    }),
  );

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
      if (reconcile.ok) await reconcile.reconciler.close();
      await owned?.close();
    },
  };
}
