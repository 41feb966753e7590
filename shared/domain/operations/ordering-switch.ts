// Switching a resource type's ordering (version <-> occurred_at): the operator's explicit step
// (`bridge ordering switch`). A resource lives by the ordering recorded with its state; the apply
// path dead-letters an event of the other ordering (`ordering_mismatch`) until this step has run.
import type { Pool } from 'pg';
import { withTransaction } from '#plumbing/db/transaction.ts';
import {
  countOrderingSwitch,
  lockStateForSwitch,
  switchResourceOrdering,
  type OrderingSwitchCount,
  type ResourceOrdering,
} from '#domain/store/state.ts';

export interface OrderingSwitchRequest {
  type: string;
  /** One tenant's resources; undefined: every tenant's. */
  tenant?: string | undefined;
  to: ResourceOrdering;
  dryRun: boolean;
  /**
   * How long to wait for the apply transactions in flight before the switch takes its lock
   * (default 10 s); applies wait for the switch's transaction meanwhile.
   */
  lockTimeoutMs?: number;
}

export interface OrderingSwitchReport {
  type: string;
  tenant: string | null;
  from: ResourceOrdering;
  to: ResourceOrdering;
  dryRun: boolean;
  /** Rows re-stamped (or, dry run, that would be). */
  rows: number;
  /** Of those, rows left without the new ordering's key: their first event of the new ordering applies. */
  withoutKey: number;
}

export const DEFAULT_SWITCH_LOCK_TIMEOUT_MS = 10_000;

/**
 * Re-stamps every stored resource of the type (and tenant) ordered the other way, in one
 * transaction that no apply can interleave with (lockStateForSwitch). Rows already ordered the
 * requested way are left alone, so running it again changes nothing.
 */
export async function switchOrdering(pool: Pool, request: OrderingSwitchRequest): Promise<OrderingSwitchReport> {
  const args = { type: request.type, tenant: request.tenant ?? null, to: request.to };
  let counts: OrderingSwitchCount;
  if (request.dryRun) counts = await countOrderingSwitch(pool, args);
  else
    counts = await withTransaction(pool, async (client) => {
      await lockStateForSwitch(client, request.lockTimeoutMs ?? DEFAULT_SWITCH_LOCK_TIMEOUT_MS);
      return switchResourceOrdering(client, args);
    });
  return {
    type: args.type,
    tenant: args.tenant,
    from: request.to === 'version' ? 'occurred_at' : 'version',
    to: request.to,
    dryRun: request.dryRun,
    rows: counts.rows,
    withoutKey: counts.without_key,
  };
}
