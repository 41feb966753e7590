import type { Pool } from 'pg';
import type { ReconcileSource } from '#domain/sources/index.ts';
import { deletePull, selectPullGeneration } from '#domain/store/reconcile-pulls.ts';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import type { EventsPublisher } from './publisher.ts';
import { Reconciler, type ReconcilerOptions, type ReconcileOutcome, type ReconcileReport, type ReconcileTrigger } from './reconciler.ts';

/** What an operator's reconcile (`bridge reconcile`, the console's button) records as its trigger. */
export const ON_DEMAND_TRIGGER: ReconcileTrigger = 'operator';

/** The outcomes of an on-demand reconcile that are an answer, not a failure (exit 0 in the CLI). */
export const ON_DEMAND_DONE: ReadonlySet<ReconcileOutcome> = new Set<ReconcileOutcome>(['applied', 'stale', 'gone']);

/** Outcomes that answer a pull the worker owes: an operator's reconcile with one clears its record. */
const SETTLES_OWED_PULL: ReadonlySet<ReconcileOutcome> = new Set<ReconcileOutcome>(['applied', 'stale']);

export interface OnDemandRequest {
  tenantId: string;
  type: string;
  id: string;
  /** The source whose API to ask; default: the one owning tenant and type. */
  sourceId?: string;
  /** Fetch and decide, publish nothing (no producer is opened). */
  dryRun: boolean;
}

export interface OnDemandOptions {
  pool: Pool;
  sources: readonly ReconcileSource[];
  /** Opens the events-topic publisher; called on the first record to send, never on a dry run. */
  openPublisher: () => EventsPublisher;
  /** For tests: how the provider's API is asked (default fetchSnapshot). */
  fetch?: ReconcilerOptions['fetch'];
}

/**
 * An operator's reconciler: one Reconciler (so one rate limit and one breaker per source for as
 * long as it lives) whose pulls are recorded with trigger `operator`, and a publisher opened only
 * when something is to be sent. The CLI makes one per run; the console one for its lifetime.
 */
export interface OnDemandReconciler {
  readonly sources: readonly ReconcileSource[];
  /** Replaces the sources (a live configuration change); a reconcile in progress finishes with the old ones. */
  setSources: (sources: readonly ReconcileSource[]) => void;
  /** Throws a BridgeError `reconcile_not_configured` when no (or more than one) source fits; see isNotConfigured. */
  reconcile: (request: OnDemandRequest) => Promise<ReconcileReport>;
  close: () => Promise<void>;
}

export function createOnDemandReconciler(options: OnDemandOptions): OnDemandReconciler {
  let publisher: EventsPublisher | undefined;
  const reconciler = new Reconciler({
    pool: options.pool,
    sources: options.sources,
    publish: (record) => (publisher ??= options.openPublisher()).publish(record),
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
  let sources = options.sources;
  return {
    get sources() {
      return sources;
    },
    setSources: (next) => {
      sources = next;
      reconciler.setSources(next);
    },
    reconcile: async (request) => {
      const resource = { tenant_id: request.tenantId, resource_type: request.type, resource_id: request.id };
      // A trigger the worker records during this pull is a question this answer may predate: its row stays.
      const generation = request.dryRun ? undefined : await selectPullGeneration(options.pool, resource);
      const report = await reconciler.reconcile({
        tenantId: request.tenantId,
        type: request.type,
        id: request.id,
        trigger: ON_DEMAND_TRIGGER,
        dryRun: request.dryRun,
        ...(request.sourceId === undefined ? {} : { sourceId: request.sourceId }),
      });
      if (!request.dryRun && SETTLES_OWED_PULL.has(report.outcome)) {
        await deletePull(options.pool, resource, generation);
      }
      return report;
    },
    close: async () => {
      const open = publisher;
      publisher = undefined;
      await open?.close();
    },
  };
}

/** One on-demand reconcile, the reconciler closed after. */
export async function reconcileOnDemand(options: OnDemandOptions, request: OnDemandRequest): Promise<ReconcileReport> {
  const reconciler = createOnDemandReconciler(options);
  try {
    return await reconciler.reconcile(request);
  } finally {
    await reconciler.close();
  }
}

/** The sources with `reconcile` that own this tenant and type (the ones an on-demand reconcile may ask). */
export function reconcileSourcesFor(sources: readonly ReconcileSource[], tenantId: string, type: string): ReconcileSource[] {
  return sources.filter((s) => s.tenants.includes(tenantId) && s.resourceTypes.includes(type));
}

/** The error the reconciler throws when no source (or several) can answer for the request. */
export function isNotConfigured(error: unknown): error is BridgeError {
  return error instanceof BridgeError && error.code === 'reconcile_not_configured';
}
