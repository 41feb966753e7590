import type { ApplyResult } from '#domain/apply/index.ts';
import { RECONCILE_SOURCE, sourceHeader } from '#domain/contract/event-headers.ts';
import type { ReconcileTrigger } from './reconciler.ts';

/**
 * Whether a committed apply result calls for a pull, and why:
 * - quarantine: the same event id came with other content; the provider's API says which is true;
 * - unseen: an update or delete applied to a resource the bridge never stored (its create, and
 *   maybe more, went missing);
 * - gap: the version jumped by more than the source allows (events in between went missing).
 * Snapshots the reconciler published never trigger another pull (no loop).
 */
export function reconcileTriggerFor(result: ApplyResult, maxVersionGap: number): ReconcileTrigger | undefined {
  if (sourceHeader(result.record.headers) === RECONCILE_SOURCE) return undefined;
  if (result.outcome === 'quarantined') return 'quarantine';
  if (result.outcome !== 'applied') return undefined;
  if (result.storedVersion === null) return result.eventType?.endsWith('.created') === true ? undefined : 'unseen';
  if (result.storedVersion !== undefined && result.version !== undefined && result.version - result.storedVersion > maxVersionGap) {
    return 'gap';
  }
  return undefined;
}
