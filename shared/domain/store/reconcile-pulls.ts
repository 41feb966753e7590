// reconcile_pulls: the pulls the worker owes (shared/domain/reconcile/pull-records.ts), until answered.
import type { Queryable } from './session.ts';
import type { ResourceRef } from './state.ts';

export type PullStatus = 'pending' | 'retrying' | 'gone' | 'failed';

export interface ReconcilePullRow extends ResourceRef {
  source: string;
  trigger: string;
  /** bigint, as text. */
  seen_version: string | null;
  status: PullStatus;
  attempts: number;
  next_attempt_at: Date | null;
  last_outcome: string | null;
  last_reason: string | null;
  last_status: number | null;
  created_at: Date;
  updated_at: Date;
}

const PULL_COLUMNS = `tenant_id, resource_type, resource_id, source, trigger, seen_version, status, attempts,
  next_attempt_at, last_outcome, last_reason, last_status, created_at, updated_at`;

/**
 * A trigger owes a pull: recorded `pending`, due at `dueInMs` (when it counts as lost if nothing
 * answered). A new trigger replaces whatever the resource's row said: it is a new question.
 */
export async function upsertPendingPull(
  client: Queryable,
  pull: ResourceRef & { source: string; trigger: string; seen_version: number | null; dueInMs: number; reason?: string },
): Promise<void> {
  await client.query({
    text: `
      INSERT INTO reconcile_pulls (tenant_id, resource_type, resource_id, source, trigger, seen_version, status, attempts,
                                   next_attempt_at, last_reason)
      VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, now() + make_interval(secs => $7::float8 / 1000), $8)
      ON CONFLICT (tenant_id, resource_type, resource_id) DO UPDATE SET
        source = EXCLUDED.source, trigger = EXCLUDED.trigger,
        seen_version = GREATEST(reconcile_pulls.seen_version, EXCLUDED.seen_version),
        status = 'pending', attempts = 0, next_attempt_at = EXCLUDED.next_attempt_at,
        last_reason = COALESCE(EXCLUDED.last_reason, reconcile_pulls.last_reason), updated_at = now()`,
    values: [
      pull.tenant_id,
      pull.resource_type,
      pull.resource_id,
      pull.source,
      pull.trigger,
      pull.seen_version,
      pull.dueInMs,
      pull.reason ?? null,
    ],
  });
}

/** An answer settled the pull (applied or stale): nothing is owed any more. */
export async function deletePull(client: Queryable, resource: ResourceRef): Promise<void> {
  await client.query({
    text: 'DELETE FROM reconcile_pulls WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3',
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
}

/** What an attempt came to: retrying (due again after `dueInMs`), gone or failed (for an operator). */
export async function updatePullAttempt(
  client: Queryable,
  pull: ResourceRef & {
    status: Exclude<PullStatus, 'pending'>;
    attempts: number;
    dueInMs: number | null;
    outcome: string;
    reason: string | null;
    httpStatus: number | null;
  },
): Promise<void> {
  await client.query({
    text: `
      UPDATE reconcile_pulls SET status = $4, attempts = $5,
        next_attempt_at = CASE WHEN $6::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => $6::float8 / 1000) END,
        last_outcome = $7, last_reason = $8, last_status = $9, updated_at = now()
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3`,
    values: [
      pull.tenant_id,
      pull.resource_type,
      pull.resource_id,
      pull.status,
      pull.attempts,
      pull.dueInMs,
      pull.outcome,
      pull.reason,
      pull.httpStatus,
    ],
  });
}

/**
 * Claims up to `limit` due pulls of these sources: each is pushed `leaseMs` into the future first,
 * so another worker polling at the same time does not take it too (SKIP LOCKED), and a claim lost
 * with its process comes due again.
 */
export async function claimDuePulls(
  client: Queryable,
  claim: { sources: readonly string[]; limit: number; leaseMs: number },
): Promise<ReconcilePullRow[]> {
  const { rows } = await client.query<ReconcilePullRow>({
    text: `
      UPDATE reconcile_pulls p SET next_attempt_at = now() + make_interval(secs => $3::float8 / 1000), updated_at = now()
      FROM (
        SELECT tenant_id, resource_type, resource_id FROM reconcile_pulls
        WHERE status IN ('pending', 'retrying') AND next_attempt_at <= now() AND source = ANY($1::text[])
        ORDER BY next_attempt_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
      ) due
      WHERE p.tenant_id = due.tenant_id AND p.resource_type = due.resource_type AND p.resource_id = due.resource_id
      RETURNING p.tenant_id, p.resource_type, p.resource_id, p.source, p.trigger, p.seen_version, p.status, p.attempts,
        p.next_attempt_at, p.last_outcome, p.last_reason, p.last_status, p.created_at, p.updated_at`,
    values: [claim.sources, claim.limit, claim.leaseMs],
  });
  return rows;
}

/** Rows by status, for the metrics gauge. */
export async function countPullsByStatus(client: Queryable): Promise<Array<{ status: PullStatus; count: number }>> {
  const { rows } = await client.query<{ status: PullStatus; count: number }>({
    text: 'SELECT status, count(*)::int AS count FROM reconcile_pulls GROUP BY status',
  });
  return rows;
}

/** Open pulls, newest first (the console's reconcile page); one resource's when given. */
export async function selectPulls(client: Queryable, filter: { limit: number; resource?: ResourceRef }): Promise<ReconcilePullRow[]> {
  const r = filter.resource;
  const { rows } = await client.query<ReconcilePullRow>({
    text: `
      SELECT ${PULL_COLUMNS} FROM reconcile_pulls
      WHERE ($2::text IS NULL OR (tenant_id = $2 AND resource_type = $3 AND resource_id = $4))
      ORDER BY updated_at DESC
      LIMIT $1`,
    values: [filter.limit, r?.tenant_id ?? null, r?.resource_type ?? null, r?.resource_id ?? null],
  });
  return rows;
}
