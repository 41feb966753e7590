// Reconcile from the console: GET /reconcile (the pulls made) and POST /resource/reconcile (the
// resource page's Reconcile: a dry run first, then the pull once confirmed; an action behind the
// guard, logged with who did it). The sources are found the way `bridge reconcile` finds them.
import { Router } from 'express';
import { selectPulls } from '#domain/store/reconcile-pulls.ts';
import {
  createEventsPublisher,
  createOnDemandReconciler,
  isNotConfigured,
  reconcileSourcesFor,
  resourceRefProblem,
  type OnDemandReconciler,
  type ReconcileReport,
} from '#domain/reconcile/index.ts';
import { LiveSources, loadReconcileSources, reconcileSourcesOf, SourcesConfigError } from '#domain/sources/index.ts';
import type { ConsoleConfig } from '../config.ts';
import { isRefusal } from '../guard.ts';
import {
  reconcilePreviewPage,
  reconcilePullsPage,
  reconcileResultPage,
  type ReconcileAvailability,
  type ReconcileTarget,
} from '../pages/reconcile.ts';
import { refusedPage } from '../pages/search.ts';
import { waitForInboxOutcome, type ConsoleClients } from '../readers.ts';
import { text, type RouteContext } from './context.ts';

/** How long a reconcile from the page waits for the worker to settle the published event. */
const RECONCILE_WAIT_MS = 30_000;

/** The console's on-demand reconciler (as `bridge reconcile`'s), or why there is none. */
export type ReconcileSetup = { ok: true; reconciler: OnDemandReconciler; file: string } | { ok: false; why: string };

/**
 * Finds the sources the way the CLI does: WEBHOOK_SOURCES_FILE, loadReconcileSources (auth values
 * from env); with SOURCES_FROM=postgres none yet, and followLiveReconcileSources keeps them current.
 */
export function reconcileSetup(config: ConsoleConfig, clients: ConsoleClients, env: Record<string, string | undefined>): ReconcileSetup {
  if (config.sourcesFrom === 'postgres')
    return {
      ok: true,
      reconciler: createOnDemandReconciler({
        pool: clients.pool,
        sources: [],
        openPublisher: () => createEventsPublisher(clients.kafka, { topic: config.names.events, logger: clients.logger }),
      }),
      file: 'Postgres (SOURCES_FROM=postgres)',
    };
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

export function reconcileRoutes(
  { config, clients, logger, ctxOf, send, authorize, route }: RouteContext,
  reconcile: ReconcileSetup,
): Router {
  const router = Router();
  router.get(
    '/reconcile',
    route(async (req, res) => {
      const [tenant, type, id] = [text(req.query.tenant), text(req.query.type), text(req.query.id)];
      const resource = tenant && type && id ? { tenant_id: tenant, resource_type: type, resource_id: id } : undefined;
      const rows = await selectPulls(clients.pool, { limit: 200, ...(resource ? { resource } : {}) });
      send(res, reconcilePullsPage(ctxOf(req), rows, resource !== undefined));
    }),
  );

  router.post(
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
      // Before any request: the provider's API would get the source's credentials for these ids.
      const refusedIds = resourceRefProblem({ tenantId: target.tenant, type: target.type, id: target.id });
      if (refusedIds !== undefined) {
        logger.warn({ action: 'reconcile', operator: session.operator, ...asked, refused: refusedIds }, 'console action refused');
        return void send(res, refusedPage(ctxOf(req), `No reconcile: ${refusedIds}`), 400);
      }
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
  return router;
}

/**
 * SOURCES_FROM=postgres: the reconcile sources follow the database while the console runs, as the
 * workers' do (no secret is read: the console verifies nothing). Its configuration version is
 * reported with the ingresses' and workers'.
 */
export function followLiveReconcileSources(
  config: ConsoleConfig,
  clients: ConsoleClients,
  setup: ReconcileSetup,
  env: Record<string, string | undefined>,
): LiveSources | undefined {
  if (config.sourcesFrom !== 'postgres' || !setup.ok) return undefined;
  const logger = clients.logger.child({ component: 'sources' });
  const live = new LiveSources({
    pool: clients.pool,
    databaseUrl: config.databaseUrl,
    keyring: undefined,
    secrets: false,
    logger,
    role: 'console',
    onSnapshot: (snapshot) =>
      setup.reconciler.setSources(
        reconcileSourcesOf(snapshot, env, (source, why) =>
          logger.error({ version: snapshot.version, source }, `reconcile: source "${source}" pulls nothing: ${why}`),
        ),
      ),
  });
  void live.start();
  return live;
}
