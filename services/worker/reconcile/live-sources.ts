import type { Registry } from 'prom-client';
import type { Pool } from 'pg';
import {
  LiveSources,
  reconcileSourcesOf as reconcileSourcesOfSnapshot,
  type LiveSnapshot,
  type ReconcileSource,
} from '#domain/sources/index.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { WorkerLiveSourcesConfig } from '../config.ts';
import { registerConfigMetrics } from '../metrics.ts';
import type { WorkerReconcile } from './reconcile-triggers.ts';

/**
 * The reconcile sources of each configuration snapshot, their API credentials read from the
 * worker's environment. A source whose credential is missing (or whose spec does not resolve) is
 * left out and logged, never thrown: a change made through the API must not stop a worker.
 */
export function reconcileSourcesOf(
  snapshot: Pick<LiveSnapshot, 'version' | 'specs'>,
  env: Record<string, string | undefined>,
  logger: Logger,
): ReconcileSource[] {
  return reconcileSourcesOfSnapshot(snapshot, env, (source, why) =>
    logger.error({ version: snapshot.version, source }, `reconcile: source "${source}" pulls nothing: ${why}`),
  );
}

/**
 * SOURCES_FROM=postgres: follows the sources tables and hands each snapshot's reconcile sources to
 * the running reconcile machinery. The worker verifies no webhook, so no secret is read or opened
 * (it needs no BRIDGE_SECRET_KEYS). Exports bridge_config_version and bridge_config_source_healthy.
 */
export function followLiveSources(options: {
  config: WorkerLiveSourcesConfig;
  pool: Pool;
  databaseUrl: string;
  reconcile: WorkerReconcile;
  registry: Registry;
  logger: Logger;
}): LiveSources {
  const logger = options.logger.child({ component: 'sources' });
  const live = new LiveSources({
    pool: options.pool,
    databaseUrl: options.databaseUrl,
    keyring: undefined,
    secrets: false,
    logger,
    role: 'worker',
    ...(options.config.pollMs === undefined ? {} : { pollMs: options.config.pollMs }),
    ...(options.config.reportMs === undefined ? {} : { reportMs: options.config.reportMs }),
    onSnapshot: (snapshot) => {
      try {
        const sources = reconcileSourcesOf(snapshot, options.config.env, logger);
        options.reconcile.setSources(sources);
        logger.info({ version: snapshot.version, reconcile: sources.map((s) => s.id) }, 'reconcile sources replaced');
      } catch (error) {
        logger.error({ err: error, version: snapshot.version }, 'reconcile: the new sources could not be set; the previous ones stay');
      }
    },
  });
  registerConfigMetrics(options.registry, live);
  return live;
}
