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
  /** bigint, as text: how many triggers the row has recorded (migration 0018). */
  generation: string;
  /** The token of the job holding the row; null when nobody does. */
  claim: string | null;
}

const PULL_COLUMNS = `tenant_id, resource_type, resource_id, source, trigger, seen_version, status, attempts,
  next_attempt_at, last_outcome, last_reason, last_status, created_at, updated_at, generation::text AS generation, claim`;

/**
 * A trigger owes a pull: recorded `pending`, due at `dueInMs` (when it counts as lost if nothing
 * answered). A new trigger replaces whatever the resource's row said: it is a new question, so its
 * generation goes up and a pull that read the row before it cannot settle it. `claim` is the token
 * of the job queued for it; `keepClaim` leaves the row with the job already holding it (the trigger
 * was coalesced into that job); null: nobody holds it.
 */
export async function upsertPendingPull(
  client: Queryable,
  pull: ResourceRef & {
    source: string;
    trigger: string;
    seen_version: number | null;
    dueInMs: number;
    reason?: string;
    claim: string | null;
    keepClaim?: boolean;
  },
): Promise<void> {
  await client.query({
    text: `
      INSERT INTO reconcile_pulls (tenant_id, resource_type, resource_id, source, trigger, seen_version, status, attempts,
                                   next_attempt_at, last_reason, claim)
      VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, now() + make_interval(secs => $7::float8 / 1000), $8, $9::uuid)
      ON CONFLICT (tenant_id, resource_type, resource_id) DO UPDATE SET
        source = EXCLUDED.source, trigger = EXCLUDED.trigger,
        seen_version = GREATEST(reconcile_pulls.seen_version, EXCLUDED.seen_version),
        status = 'pending', attempts = 0, next_attempt_at = EXCLUDED.next_attempt_at,
        last_reason = COALESCE(EXCLUDED.last_reason, reconcile_pulls.last_reason), updated_at = now(),
        generation = reconcile_pulls.generation + 1,
        claim = CASE WHEN $10::boolean THEN reconcile_pulls.claim ELSE EXCLUDED.claim END`,
    values: [
      pull.tenant_id,
      pull.resource_type,
      pull.resource_id,
      pull.source,
      pull.trigger,
      pull.seen_version,
      pull.dueInMs,
      pull.reason ?? null,
      pull.claim,
      pull.keepClaim === true,
    ],
  });
}

/**
 * The job holding `claim` starts its pull: the row is leased again and its generation read (a
 * trigger recorded after this is answered by another pull). Undefined when the job no longer holds
 * the row (another worker took it over, or an operator's pull answered it).
 */
export async function takePull(
  client: Queryable,
  pull: ResourceRef & { claim: string; leaseMs: number },
): Promise<{ generation: string; attempts: number } | undefined> {
  const { rows } = await client.query<{ generation: string; attempts: number }>({
    text: `
      UPDATE reconcile_pulls SET next_attempt_at = now() + make_interval(secs => $5::float8 / 1000)
      WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3 AND claim = $4::uuid
      RETURNING generation::text AS generation, attempts`,
    values: [pull.tenant_id, pull.resource_type, pull.resource_id, pull.claim, pull.leaseMs],
  });
  return rows[0];
}

/** Keeps the rows these jobs hold leased (queued or running), as long as their worker lives. */
export async function renewPullClaims(
  client: Queryable,
  renew: { claims: ReadonlyArray<ResourceRef & { claim: string }>; leaseMs: number },
) {
  if (renew.claims.length === 0) return;
  await client.query({
    text: `
      UPDATE reconcile_pulls p SET next_attempt_at = now() + make_interval(secs => $5::float8 / 1000)
      FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[]) AS c(tenant_id, resource_type, resource_id, claim)
      WHERE p.tenant_id = c.tenant_id AND p.resource_type = c.resource_type AND p.resource_id = c.resource_id
        AND p.claim = c.claim AND p.status IN ('pending', 'retrying')`,
    values: [
      renew.claims.map((c) => c.tenant_id),
      renew.claims.map((c) => c.resource_type),
      renew.claims.map((c) => c.resource_id),
      renew.claims.map((c) => c.claim),
      renew.leaseMs,
    ],
  });
}

/**
 * What writing a job's answer did: `written`; `newer` (a trigger came after the pull read the row:
 * the row stays, released and due now, so a pull after that trigger answers it); `lost` (the job
 * no longer holds the row: nothing written).
 */
export type PullWrite = 'written' | 'newer' | 'lost';

/** Releases the row for a trigger newer than the job's pull: due now, held by nobody. */
const RELEASE_NEWER = `
  released AS (
    UPDATE reconcile_pulls SET claim = NULL, next_attempt_at = now(), updated_at = now()
    WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3 AND claim = $4::uuid AND generation <> $5::bigint
    RETURNING 1
  )`;

function pullWrite(row: { written: number; released: number } | undefined): PullWrite {
  return row !== undefined && row.written > 0 ? 'written' : row !== undefined && row.released > 0 ? 'newer' : 'lost';
}

/** An answer settled the job's pull (applied or stale): nothing is owed any more, unless a trigger came after it. */
export async function settlePull(client: Queryable, pull: ResourceRef & { claim: string; generation: string }): Promise<PullWrite> {
  const { rows } = await client.query<{ written: number; released: number }>({
    text: `
      WITH written AS (
        DELETE FROM reconcile_pulls
        WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3 AND claim = $4::uuid AND generation = $5::bigint
        RETURNING 1
      ), ${RELEASE_NEWER}
      SELECT (SELECT count(*) FROM written)::int AS written, (SELECT count(*) FROM released)::int AS released`,
    values: [pull.tenant_id, pull.resource_type, pull.resource_id, pull.claim, pull.generation],
  });
  return pullWrite(rows[0]);
}

/**
 * An operator's pull answered the resource: its row goes, if no trigger came after the pull began
 * (`generation` as read then; undefined: there was no row, and one recorded since is a new question).
 */
export async function deletePull(client: Queryable, resource: ResourceRef, generation: string | undefined): Promise<void> {
  if (generation === undefined) return;
  await client.query({
    text: 'DELETE FROM reconcile_pulls WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3 AND generation = $4::bigint',
    values: [resource.tenant_id, resource.resource_type, resource.resource_id, generation],
  });
}

/** The generation of a resource's row (undefined: no pull owed), read before an operator's pull. */
export async function selectPullGeneration(client: Queryable, resource: ResourceRef): Promise<string | undefined> {
  const { rows } = await client.query<{ generation: string }>({
    text: 'SELECT generation::text AS generation FROM reconcile_pulls WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3',
    values: [resource.tenant_id, resource.resource_type, resource.resource_id],
  });
  return rows[0]?.generation;
}

/**
 * What the job's attempt came to: retrying (due again after `dueInMs`), gone or failed (for an
 * operator); the job's claim ends with it. Written only while the job holds the row and no trigger
 * came after its pull (see PullWrite).
 */
export async function updatePullAttempt(
  client: Queryable,
  pull: ResourceRef & {
    claim: string;
    generation: string;
    status: Exclude<PullStatus, 'pending'>;
    attempts: number;
    dueInMs: number | null;
    outcome: string;
    reason: string | null;
    httpStatus: number | null;
  },
): Promise<PullWrite> {
  const { rows } = await client.query<{ written: number; released: number }>({
    text: `
      WITH written AS (
        UPDATE reconcile_pulls SET status = $6, attempts = $7,
          next_attempt_at = CASE WHEN $8::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => $8::float8 / 1000) END,
          last_outcome = $9, last_reason = $10, last_status = $11, updated_at = now(), claim = NULL
        WHERE tenant_id = $1 AND resource_type = $2 AND resource_id = $3 AND claim = $4::uuid AND generation = $5::bigint
        RETURNING 1
      ), ${RELEASE_NEWER}
      SELECT (SELECT count(*) FROM written)::int AS written, (SELECT count(*) FROM released)::int AS released`,
    values: [
      pull.tenant_id,
      pull.resource_type,
      pull.resource_id,
      pull.claim,
      pull.generation,
      pull.status,
      pull.attempts,
      pull.dueInMs,
      pull.outcome,
      pull.reason,
      pull.httpStatus,
    ],
  });
  return pullWrite(rows[0]);
}

/**
 * Claims up to `limit` due pulls of these sources, each with a fresh claim token: each is pushed
 * `leaseMs` into the future first, so another worker polling at the same time does not take it
 * too (SKIP LOCKED); the claiming worker renews it while its job waits or runs, and a claim lost
 * with its process comes due again.
 */
export async function claimDuePulls(
  client: Queryable,
  claim: { sources: readonly string[]; limit: number; leaseMs: number },
): Promise<ReconcilePullRow[]> {
  const { rows } = await client.query<ReconcilePullRow>({
    text: `
      UPDATE reconcile_pulls p SET next_attempt_at = now() + make_interval(secs => $3::float8 / 1000), updated_at = now(),
        claim = gen_random_uuid()
      FROM (
        SELECT tenant_id, resource_type, resource_id FROM reconcile_pulls
        WHERE status IN ('pending', 'retrying') AND next_attempt_at <= now() AND source = ANY($1::text[])
        ORDER BY next_attempt_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
      ) due
      WHERE p.tenant_id = due.tenant_id AND p.resource_type = due.resource_type AND p.resource_id = due.resource_id
      RETURNING p.tenant_id, p.resource_type, p.resource_id, p.source, p.trigger, p.seen_version, p.status, p.attempts,
        p.next_attempt_at, p.last_outcome, p.last_reason, p.last_status, p.created_at, p.updated_at,
        p.generation::text AS generation, p.claim`,
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
