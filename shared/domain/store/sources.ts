// Sources as data (migration 0019): the rows behind the operator API, the CLI's `bridge sources`
// and every ingress's and worker's live configuration. shared/domain/sources/catalog.ts owns the rules.
import type { Pool, PoolClient } from 'pg';
import { withTransaction } from '#plumbing/db/transaction.ts';

type Queryable = Pool | PoolClient;

/** The channel every configuration write notifies, with the new version as its payload. */
export const CONFIG_CHANNEL = 'bridge_config';
// Arbitrary but fixed: configuration writes serialise on it, so each validates the whole set as committed.
const CONFIG_WRITE_LOCK_KEY = 7_261_003_419;

export interface SourceRow {
  id: string;
  spec: unknown;
  enabled: boolean;
  revision: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface SecretRow {
  sourceId: string;
  secretId: string;
  keyId: string;
  sealed: Buffer;
  retireAfter: Date | null;
  createdAt: Date;
  lastVerifiedAt: Date | null;
}

export interface AuditRow {
  id: number;
  at: Date;
  actor: string;
  action: string;
  sourceId: string | null;
  configVersion: number;
  diff: unknown;
}

/**
 * The configuration as one consistent read: the version and the rows it stands for (a write between
 * the statements cannot pair a version with rows of another).
 */
export async function readConfigSnapshot(
  pool: Pool,
  options: { secrets: boolean } = { secrets: true },
): Promise<{ version: number; rows: SourceRow[]; secrets: SecretRow[] }> {
  return withTransaction(
    pool,
    async (client) => ({
      version: await readConfigVersion(client),
      rows: await listSourceRows(client),
      secrets: options.secrets ? await listSecretRows(client) : [],
    }),
    'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY',
  );
}

export async function readConfigVersion(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ version: string }>('SELECT version FROM bridge_config');
  return Number(rows[0]?.version ?? 0);
}

/** Serialises configuration writes until the transaction ends. */
export async function lockConfigWrites(client: PoolClient): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock($1)', [CONFIG_WRITE_LOCK_KEY]);
}

/** Bumps the version in the write's transaction; the notification is delivered at its commit. */
export async function bumpConfigVersion(client: PoolClient): Promise<number> {
  const { rows } = await client.query<{ version: string }>('UPDATE bridge_config SET version = version + 1 RETURNING version');
  const version = Number(rows[0]!.version);
  await client.query('SELECT pg_notify($1, $2)', [CONFIG_CHANNEL, String(version)]);
  return version;
}

function sourceRow(r: { id: string; spec: unknown; enabled: boolean; revision: string; created_at: Date; updated_at: Date }): SourceRow {
  return { id: r.id, spec: r.spec, enabled: r.enabled, revision: Number(r.revision), createdAt: r.created_at, updatedAt: r.updated_at };
}

export async function listSourceRows(q: Queryable): Promise<SourceRow[]> {
  const { rows } = await q.query('SELECT id, spec, enabled, revision, created_at, updated_at FROM bridge_sources ORDER BY id');
  return rows.map(sourceRow);
}

export async function getSourceRow(q: Queryable, id: string): Promise<SourceRow | undefined> {
  const { rows } = await q.query('SELECT id, spec, enabled, revision, created_at, updated_at FROM bridge_sources WHERE id = $1', [id]);
  return rows[0] === undefined ? undefined : sourceRow(rows[0]);
}

export async function insertSourceRow(client: PoolClient, row: { id: string; spec: unknown; enabled: boolean }): Promise<SourceRow> {
  const { rows } = await client.query(
    'INSERT INTO bridge_sources (id, spec, enabled) VALUES ($1, $2, $3) RETURNING id, spec, enabled, revision, created_at, updated_at',
    [row.id, JSON.stringify(row.spec), row.enabled],
  );
  return sourceRow(rows[0]);
}

/** Writes the source and bumps its revision; undefined when its revision is no longer `expectedRevision`. */
export async function updateSourceRow(
  client: PoolClient,
  id: string,
  expectedRevision: number,
  change: { spec: unknown; enabled: boolean },
): Promise<SourceRow | undefined> {
  const { rows } = await client.query(
    `UPDATE bridge_sources SET spec = $3, enabled = $4, revision = revision + 1, updated_at = now()
      WHERE id = $1 AND revision = $2 RETURNING id, spec, enabled, revision, created_at, updated_at`,
    [id, expectedRevision, JSON.stringify(change.spec), change.enabled],
  );
  return rows[0] === undefined ? undefined : sourceRow(rows[0]);
}

/** Deletes the source (its secrets with it) if its revision is still `expectedRevision`. */
export async function deleteSourceRow(client: PoolClient, id: string, expectedRevision: number): Promise<boolean> {
  const { rowCount } = await client.query('DELETE FROM bridge_sources WHERE id = $1 AND revision = $2', [id, expectedRevision]);
  return (rowCount ?? 0) > 0;
}

function secretRow(r: {
  source_id: string;
  secret_id: string;
  key_id: string;
  sealed: Buffer;
  retire_after: Date | null;
  created_at: Date;
  last_verified_at: Date | null;
}): SecretRow {
  return {
    sourceId: r.source_id,
    secretId: r.secret_id,
    keyId: r.key_id,
    sealed: r.sealed,
    retireAfter: r.retire_after,
    createdAt: r.created_at,
    lastVerifiedAt: r.last_verified_at,
  };
}

export async function listSecretRows(q: Queryable, sourceId?: string): Promise<SecretRow[]> {
  const { rows } = await q.query(
    `SELECT source_id, secret_id, key_id, sealed, retire_after, created_at, last_verified_at FROM bridge_source_secrets
      WHERE $1::text IS NULL OR source_id = $1 ORDER BY source_id, created_at, secret_id`,
    [sourceId ?? null],
  );
  return rows.map(secretRow);
}

export async function insertSecretRow(
  client: PoolClient,
  row: { sourceId: string; secretId: string; keyId: string; sealed: Buffer; retireAfter: Date | null },
): Promise<void> {
  await client.query('INSERT INTO bridge_source_secrets (source_id, secret_id, key_id, sealed, retire_after) VALUES ($1, $2, $3, $4, $5)', [
    row.sourceId,
    row.secretId,
    row.keyId,
    row.sealed,
    row.retireAfter,
  ]);
}

/** Re-seals a secret (a key rotation) or changes its value in place. */
export async function resealSecretRow(
  client: PoolClient,
  sourceId: string,
  secretId: string,
  keyId: string,
  sealed: Buffer,
): Promise<void> {
  await client.query('UPDATE bridge_source_secrets SET key_id = $3, sealed = $4 WHERE source_id = $1 AND secret_id = $2', [
    sourceId,
    secretId,
    keyId,
    sealed,
  ]);
}

export async function setSecretRetireAfter(
  client: PoolClient,
  sourceId: string,
  secretId: string,
  retireAfter: Date | null,
): Promise<void> {
  await client.query('UPDATE bridge_source_secrets SET retire_after = $3 WHERE source_id = $1 AND secret_id = $2', [
    sourceId,
    secretId,
    retireAfter,
  ]);
}

export async function deleteSecretRow(client: PoolClient, sourceId: string, secretId: string): Promise<void> {
  await client.query('DELETE FROM bridge_source_secrets WHERE source_id = $1 AND secret_id = $2', [sourceId, secretId]);
}

/** When each secret last verified a request (an ingress's flush); never moves a time backwards. */
export async function recordSecretUses(q: Queryable, uses: ReadonlyArray<{ sourceId: string; secretId: string; at: Date }>): Promise<void> {
  if (uses.length === 0) return;
  await q.query(
    `UPDATE bridge_source_secrets s SET last_verified_at = GREATEST(s.last_verified_at, u.at)
       FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(source_id, secret_id, at)
      WHERE s.source_id = u.source_id AND s.secret_id = u.secret_id`,
    [uses.map((u) => u.sourceId), uses.map((u) => u.secretId), uses.map((u) => u.at)],
  );
}

export async function insertAuditRow(
  client: PoolClient,
  row: { actor: string; action: string; sourceId: string | null; configVersion: number; diff: unknown },
): Promise<void> {
  await client.query('INSERT INTO bridge_audit_log (actor, action, source_id, config_version, diff) VALUES ($1, $2, $3, $4, $5)', [
    row.actor,
    row.action,
    row.sourceId,
    row.configVersion,
    JSON.stringify(row.diff),
  ]);
}

/** Newest first; `beforeId` pages back. */
export async function listAuditRows(q: Queryable, options: { sourceId?: string; limit: number; beforeId?: number }): Promise<AuditRow[]> {
  const { rows } = await q.query(
    `SELECT id, at, actor, action, source_id, config_version, diff FROM bridge_audit_log
      WHERE ($1::text IS NULL OR source_id = $1) AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
    [options.sourceId ?? null, options.beforeId ?? null, options.limit],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    at: r.at,
    actor: r.actor,
    action: r.action,
    sourceId: r.source_id,
    configVersion: Number(r.config_version),
    diff: r.diff,
  }));
}

export interface TokenRow {
  name: string;
  scope: 'read' | 'write';
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

function tokenRow(r: {
  name: string;
  scope: 'read' | 'write';
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}): TokenRow {
  return { name: r.name, scope: r.scope, createdAt: r.created_at, revokedAt: r.revoked_at, lastUsedAt: r.last_used_at };
}

/** false when the name is taken. */
export async function insertTokenRow(q: Queryable, row: { name: string; sha256: Buffer; scope: 'read' | 'write' }): Promise<boolean> {
  const { rowCount } = await q.query(
    'INSERT INTO bridge_operator_tokens (name, token_sha256, scope) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING',
    [row.name, row.sha256, row.scope],
  );
  return (rowCount ?? 0) > 0;
}

/** The live (not revoked) token with this digest, marking it used. */
export async function useTokenRow(q: Queryable, sha256: Buffer): Promise<TokenRow | undefined> {
  const { rows } = await q.query(
    `UPDATE bridge_operator_tokens SET last_used_at = now() WHERE token_sha256 = $1 AND revoked_at IS NULL
      RETURNING name, scope, created_at, revoked_at, last_used_at`,
    [sha256],
  );
  return rows[0] === undefined ? undefined : tokenRow(rows[0]);
}

export async function listTokenRows(q: Queryable): Promise<TokenRow[]> {
  const { rows } = await q.query('SELECT name, scope, created_at, revoked_at, last_used_at FROM bridge_operator_tokens ORDER BY name');
  return rows.map(tokenRow);
}

export async function revokeTokenRow(q: Queryable, name: string): Promise<boolean> {
  const { rowCount } = await q.query('UPDATE bridge_operator_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL', [name]);
  return (rowCount ?? 0) > 0;
}

export interface InstanceRow {
  instance: string;
  role: string;
  configVersion: number;
  seenAt: Date;
}

export async function reportInstance(q: Queryable, row: { instance: string; role: string; configVersion: number }): Promise<void> {
  await q.query(
    `INSERT INTO bridge_config_instances (instance, role, config_version, seen_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (instance) DO UPDATE SET role = EXCLUDED.role, config_version = EXCLUDED.config_version, seen_at = now()`,
    [row.instance, row.role, row.configVersion],
  );
}

/** The instances seen within the last hour (older rows are dropped). */
export async function listInstances(q: Queryable): Promise<InstanceRow[]> {
  await q.query("DELETE FROM bridge_config_instances WHERE seen_at < now() - interval '1 hour'");
  const { rows } = await q.query('SELECT instance, role, config_version, seen_at FROM bridge_config_instances ORDER BY role, instance');
  return rows.map((r) => ({ instance: r.instance, role: r.role, configVersion: Number(r.config_version), seenAt: r.seen_at }));
}
