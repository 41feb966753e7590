// The one place that changes sources: the operator API, the console and `bridge sources` all call
// it. Every write is one transaction that serialises on the configuration lock, checks the revision
// the caller read (412 when another write came first), validates the whole set as it will be, seals
// new secrets, bumps the configuration version (which notifies every ingress and worker) and writes
// an audit row whose diff names secrets but never holds their values.
import canonicalize from 'canonicalize';
import type { Pool, PoolClient } from 'pg';
import { withTransaction } from '#plumbing/db/transaction.ts';
import type { SigningSecret } from '#domain/signing/index.ts';
import {
  bumpConfigVersion,
  deleteSecretRow,
  deleteSourceRow,
  getSourceRow,
  insertAuditRow,
  insertSecretRow,
  insertSourceRow,
  listAuditRows,
  listSecretRows,
  listSourceRows,
  lockConfigWrites,
  readConfigVersion,
  resealSecretRow,
  setSecretRetireAfter,
  updateSourceRow,
  type AuditRow,
  type SecretRow,
  type SourceRow,
} from '#domain/store/sources.ts';
import { generateSecret, openSecret, sealSecret, type SecretKeyring } from './secret-box.ts';
import {
  parseInput,
  rotateSchema,
  secretValueProblem,
  sourceCreateSchema,
  SourceInputError,
  sourceSetProblems,
  sourceUpdateSchema,
  storedSourceProblems,
  storedSourceSchema,
  type DesiredSource,
  type FieldProblem,
  type StoredSource,
} from './source-spec.ts';

/** Who made a change: an operator token's name, `console:<token name>` or `cli:<user>`. */
export type Actor = string;

export interface SecretView {
  id: string;
  keyId: string;
  createdAt: string;
  retireAfter: string | null;
  /** When an ingress last verified a request with it (flushed every few seconds); null: never. */
  lastVerifiedAt: string | null;
  /** retired: past retireAfter, refused; retiring: verifying until retireAfter. */
  state: 'active' | 'retiring' | 'retired';
}

export interface SourceView {
  id: string;
  enabled: boolean;
  revision: number;
  createdAt: string;
  updatedAt: string;
  spec: StoredSource;
  secrets: SecretView[];
}

export interface AuditEntry {
  id: number;
  at: string;
  actor: string;
  action: string;
  sourceId: string | null;
  configVersion: number;
  diff: unknown;
}

/** A refusal with the HTTP status the API answers it with. */
export class CatalogError extends Error {
  readonly status: 404 | 409 | 412 | 503;
  readonly code: string;
  constructor(status: 404 | 409 | 412 | 503, code: string, message: string) {
    super(message);
    this.name = 'CatalogError';
    this.status = status;
    this.code = code;
  }
}

/** One change to a field of a source, as the audit log and `apply` print it; secrets by id only. */
export interface FieldChange {
  field: string;
  from?: unknown;
  to?: unknown;
}

export interface PlannedChange {
  action: 'create' | 'update' | 'delete' | 'unchanged';
  sourceId: string;
  changes: FieldChange[];
}

interface Loaded {
  row: SourceRow;
  spec: StoredSource;
  secretRows: SecretRow[];
}

const SECRET_LISTED = (row: SecretRow) => ({ id: row.secretId, keyId: row.keyId, retireAfter: row.retireAfter?.toISOString() ?? null });

function same(a: unknown, b: unknown): boolean {
  return canonicalize(a) === canonicalize(b);
}

/** Top-level field changes between two specs (nested values compared whole). */
export function specChanges(before: StoredSource | undefined, after: StoredSource | undefined): FieldChange[] {
  const fields = new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})]);
  const changes: FieldChange[] = [];
  for (const field of [...fields].sort()) {
    const from = (before as Record<string, unknown> | undefined)?.[field];
    const to = (after as Record<string, unknown> | undefined)?.[field];
    if (!same(from, to)) changes.push({ field, ...(from === undefined ? {} : { from }), ...(to === undefined ? {} : { to }) });
  }
  return changes;
}

function secretState(row: SecretRow, now: number): SecretView['state'] {
  if (row.retireAfter === null) return 'active';
  return row.retireAfter.getTime() <= now ? 'retired' : 'retiring';
}

export class SourceCatalog {
  readonly #pool: Pool;
  readonly #keyring: SecretKeyring | undefined;
  readonly #now: () => number;

  constructor(pool: Pool, keyring: SecretKeyring | undefined, now: () => number = Date.now) {
    this.#pool = pool;
    this.#keyring = keyring;
    this.#now = now;
  }

  #view(row: SourceRow, secretRows: SecretRow[]): SourceView {
    const now = this.#now();
    return {
      id: row.id,
      enabled: row.enabled,
      revision: row.revision,
      createdAt: row.createdAt.toISOString(),
      updatedAt: row.updatedAt.toISOString(),
      spec: storedSourceSchema.parse(row.spec),
      secrets: secretRows.map((s) => ({
        id: s.secretId,
        keyId: s.keyId,
        createdAt: s.createdAt.toISOString(),
        retireAfter: s.retireAfter?.toISOString() ?? null,
        lastVerifiedAt: s.lastVerifiedAt?.toISOString() ?? null,
        state: secretState(s, now),
      })),
    };
  }

  async configVersion(): Promise<number> {
    return readConfigVersion(this.#pool);
  }

  async list(): Promise<SourceView[]> {
    const [rows, secrets] = await Promise.all([listSourceRows(this.#pool), listSecretRows(this.#pool)]);
    return rows.map((row) =>
      this.#view(
        row,
        secrets.filter((s) => s.sourceId === row.id),
      ),
    );
  }

  async get(id: string): Promise<SourceView> {
    const row = await getSourceRow(this.#pool, id);
    if (row === undefined) throw new CatalogError(404, 'not_found', `no source "${id}"`);
    return this.#view(row, await listSecretRows(this.#pool, id));
  }

  async history(options: { sourceId?: string; limit?: number; beforeId?: number } = {}): Promise<AuditEntry[]> {
    const rows = await listAuditRows(this.#pool, { limit: Math.min(options.limit ?? 50, 500), ...options });
    return rows.map((r: AuditRow) => ({ ...r, at: r.at.toISOString() }));
  }

  /** Runs one write: lock, load everything, change, validate the set, bump, audit. */
  async #write<T>(
    actor: Actor,
    fn: (tx: WriteTx) => Promise<T>,
  ): Promise<{ result: T; configVersion: number; audits: Array<{ action: string; sourceId: string; diff: unknown }> }> {
    return withTransaction(this.#pool, async (client) => {
      await lockConfigWrites(client);
      const tx = new WriteTx(client, this.#keyring, await this.#loadAll(client));
      const result = await fn(tx);
      if (tx.audits.length === 0) return { result, configVersion: await readConfigVersion(client), audits: [] };
      const problems = sourceSetProblems(tx.finalSet());
      if (problems.length > 0) throw new SourceInputError(422, problems);
      const configVersion = await bumpConfigVersion(client);
      for (const audit of tx.audits) await insertAuditRow(client, { actor, configVersion, ...audit });
      return { result, configVersion, audits: tx.audits };
    });
  }

  async #loadAll(client: PoolClient): Promise<Map<string, Loaded>> {
    const [rows, secrets] = await Promise.all([listSourceRows(client), listSecretRows(client)]);
    return new Map(
      rows.map((row) => [
        row.id,
        { row, spec: storedSourceSchema.parse(row.spec), secretRows: secrets.filter((s) => s.sourceId === row.id) },
      ]),
    );
  }

  async create(actor: Actor, input: unknown): Promise<{ source: SourceView; generated: Array<{ id: string; value: string }> }> {
    const parsed = parseInput(sourceCreateSchema, input);
    const { secrets, enabled, ...rest } = parsed;
    const spec = storedSourceSchema.parse(rest);
    const generated: Array<{ id: string; value: string }> = [];
    const values = secrets.map((s) => {
      const value = s.value ?? generateSecret(spec.scheme);
      if (s.generate) generated.push({ id: s.id, value });
      return { id: s.id, value, ...(s.retireAfter === undefined ? {} : { retireAfter: s.retireAfter }) };
    });
    await this.#write(actor, (tx) => tx.create({ spec, secrets: values }, enabled));
    return { source: await this.get(spec.id), generated };
  }

  async update(actor: Actor, id: string, ifRevision: number, input: unknown): Promise<SourceView> {
    const spec = parseInput(sourceUpdateSchema, input);
    if (spec.id !== id) throw new SourceInputError(422, [{ path: 'id', message: `the source's id is "${id}"; ids do not change` }]);
    await this.#write(actor, async (tx) => tx.updateSpec(tx.current(id, ifRevision), spec));
    return this.get(id);
  }

  async setEnabled(actor: Actor, id: string, ifRevision: number, enabled: boolean): Promise<SourceView> {
    await this.#write(actor, async (tx) => tx.setEnabled(tx.current(id, ifRevision), enabled));
    return this.get(id);
  }

  async remove(actor: Actor, id: string, ifRevision: number): Promise<void> {
    await this.#write(actor, async (tx) => tx.remove(tx.current(id, ifRevision)));
  }

  /** A new secret that verifies at once; every secret already there verifies until retireOthersAfter. */
  async rotate(
    actor: Actor,
    id: string,
    ifRevision: number,
    input: unknown,
  ): Promise<{ source: SourceView; secretId: string; generated?: string }> {
    const parsed = parseInput(rotateSchema, input);
    const retire = new Date(parsed.retireOthersAfter);
    const secretId = parsed.secretId ?? `${id}-${new Date(this.#now()).toISOString().replace(/[-:]|\.\d+/g, '')}`.slice(0, 64);
    let generated: string | undefined;
    await this.#write(actor, async (tx) => {
      const loaded = tx.current(id, ifRevision);
      const value = parsed.value ?? generateSecret(loaded.spec.scheme);
      if (parsed.generate) generated = value;
      await tx.rotate(loaded, secretId, value, retire);
    });
    return { source: await this.get(id), secretId, ...(generated === undefined ? {} : { generated }) };
  }

  /** What `apply` would change, changing nothing. */
  async plan(desired: DesiredSource[], options: { prune?: boolean } = {}): Promise<PlannedChange[]> {
    const client = await this.#pool.connect();
    try {
      const tx = new WriteTx(client, this.#keyring, await this.#loadAll(client), true);
      return await tx.apply(desired, options.prune ?? false);
    } finally {
      client.release();
    }
  }

  /** Makes the database hold `desired`, in one transaction; `enabled` is left as operators set it. */
  async apply(
    actor: Actor,
    desired: DesiredSource[],
    options: { prune?: boolean } = {},
  ): Promise<{ changes: PlannedChange[]; configVersion: number }> {
    const { result, configVersion } = await this.#write(actor, (tx) => tx.apply(desired, options.prune ?? false));
    return { changes: result, configVersion };
  }

  /** Re-seals every secret under the active key (after a key rotation); the values do not change. */
  async rekey(actor: Actor): Promise<number> {
    const { result } = await this.#write(actor, (tx) => tx.rekey());
    return result;
  }
}

/** One write's view of the whole set, and the statements that change it. */
class WriteTx {
  readonly audits: Array<{ action: string; sourceId: string; diff: unknown }> = [];
  readonly #client: PoolClient;
  readonly #keyring: SecretKeyring | undefined;
  readonly #set: Map<string, Loaded>;
  readonly #dryRun: boolean;
  /** Secret values as they will be, by source: opened lazily, for the shared-key check. */
  readonly #values = new Map<string, SigningSecret[]>();

  constructor(client: PoolClient, keyring: SecretKeyring | undefined, set: Map<string, Loaded>, dryRun = false) {
    this.#client = client;
    this.#keyring = keyring;
    this.#set = set;
    this.#dryRun = dryRun;
  }

  #keys(): SecretKeyring {
    if (this.#keyring === undefined)
      throw new CatalogError(503, 'no_secret_key', 'BRIDGE_SECRET_KEYS is not set: sources with secrets cannot be stored or read');
    return this.#keyring;
  }

  current(id: string, ifRevision: number): Loaded {
    const loaded = this.#set.get(id);
    if (loaded === undefined) throw new CatalogError(404, 'not_found', `no source "${id}"`);
    if (loaded.row.revision !== ifRevision)
      throw new CatalogError(
        412,
        'stale_revision',
        `source "${id}" is at revision ${loaded.row.revision}, not ${ifRevision}: read it again and retry`,
      );
    return loaded;
  }

  #secretsOf(loaded: Loaded): SigningSecret[] {
    const cached = this.#values.get(loaded.row.id);
    if (cached) return cached;
    const keys = this.#keys();
    const values = loaded.secretRows.map((r) => ({ id: r.secretId, value: openSecret(keys, r.sourceId, r.secretId, r.keyId, r.sealed) }));
    this.#values.set(loaded.row.id, values);
    return values;
  }

  finalSet(): Array<{ spec: StoredSource; secrets: SigningSecret[] }> {
    return [...this.#set.values()].map((loaded) => ({ spec: loaded.spec, secrets: this.#secretsOf(loaded) }));
  }

  #check(spec: StoredSource, secrets: ReadonlyArray<{ id: string; value: string }>): void {
    const problems: FieldProblem[] = storedSourceProblems(spec);
    const ids = new Set<string>();
    secrets.forEach((s, j) => {
      if (ids.has(s.id)) problems.push({ path: `secrets.${j}.id`, message: `duplicate secret id "${s.id}"` });
      ids.add(s.id);
      const problem = secretValueProblem(spec.scheme, s.value);
      if (problem) problems.push({ path: `secrets.${j}.value`, message: `secret "${s.id}" ${problem}` });
    });
    if (problems.length > 0) throw new SourceInputError(422, problems);
  }

  async #insertSecret(sourceId: string, secret: { id: string; value: string; retireAfter?: string | Date | null }): Promise<SecretRow> {
    const { keyId, sealed } = sealSecret(this.#keys(), sourceId, secret.id, secret.value);
    const retireAfter = secret.retireAfter == null ? null : new Date(secret.retireAfter);
    if (!this.#dryRun) await insertSecretRow(this.#client, { sourceId, secretId: secret.id, keyId, sealed, retireAfter });
    return { sourceId, secretId: secret.id, keyId, sealed, retireAfter, createdAt: new Date(), lastVerifiedAt: null };
  }

  async create(desired: DesiredSource, enabled: boolean): Promise<FieldChange[]> {
    const { spec } = desired;
    if (this.#set.has(spec.id)) throw new CatalogError(409, 'exists', `source "${spec.id}" exists`);
    this.#check(spec, desired.secrets);
    const row: SourceRow = this.#dryRun
      ? { id: spec.id, spec, enabled, revision: 1, createdAt: new Date(), updatedAt: new Date() }
      : await insertSourceRow(this.#client, { id: spec.id, spec, enabled });
    const secretRows: SecretRow[] = [];
    for (const secret of desired.secrets) secretRows.push(await this.#insertSecret(spec.id, secret));
    this.#set.set(spec.id, { row, spec, secretRows });
    this.#values.set(
      spec.id,
      desired.secrets.map((s) => ({ id: s.id, value: s.value })),
    );
    const changes = [
      ...specChanges(undefined, spec),
      { field: 'enabled', to: enabled },
      { field: 'secrets', to: secretRows.map(SECRET_LISTED) },
    ];
    this.audits.push({ action: 'create', sourceId: spec.id, diff: changes });
    return changes;
  }

  async #saveRow(loaded: Loaded, spec: StoredSource, enabled: boolean): Promise<void> {
    if (this.#dryRun) return;
    const row = await updateSourceRow(this.#client, loaded.row.id, loaded.row.revision, { spec, enabled });
    if (row === undefined)
      throw new CatalogError(412, 'stale_revision', `source "${loaded.row.id}" changed meanwhile: read it again and retry`);
    loaded.row = row;
  }

  async updateSpec(loaded: Loaded, spec: StoredSource): Promise<FieldChange[]> {
    this.#check(spec, this.#secretsOf(loaded));
    const changes = specChanges(loaded.spec, spec);
    if (changes.length === 0) return changes;
    await this.#saveRow(loaded, spec, loaded.row.enabled);
    loaded.spec = spec;
    this.audits.push({ action: 'update', sourceId: loaded.row.id, diff: changes });
    return changes;
  }

  async setEnabled(loaded: Loaded, enabled: boolean): Promise<void> {
    if (loaded.row.enabled === enabled) return;
    await this.#saveRow(loaded, loaded.spec, enabled);
    this.audits.push({
      action: enabled ? 'enable' : 'disable',
      sourceId: loaded.row.id,
      diff: [{ field: 'enabled', from: !enabled, to: enabled }],
    });
  }

  async remove(loaded: Loaded): Promise<void> {
    if (!this.#dryRun && !(await deleteSourceRow(this.#client, loaded.row.id, loaded.row.revision)))
      throw new CatalogError(412, 'stale_revision', `source "${loaded.row.id}" changed meanwhile: read it again and retry`);
    this.#set.delete(loaded.row.id);
    this.audits.push({
      action: 'delete',
      sourceId: loaded.row.id,
      diff: [...specChanges(loaded.spec, undefined), { field: 'secrets', from: loaded.secretRows.map(SECRET_LISTED) }],
    });
  }

  async rotate(loaded: Loaded, secretId: string, value: string, retireOthersAfter: Date): Promise<void> {
    if (loaded.secretRows.some((s) => s.secretId === secretId))
      throw new SourceInputError(422, [{ path: 'secretId', message: `source "${loaded.row.id}" already has a secret "${secretId}"` }]);
    const values = [...this.#secretsOf(loaded), { id: secretId, value }];
    this.#check(loaded.spec, values);
    const changes: FieldChange[] = [];
    for (const row of loaded.secretRows) {
      // A secret already retiring sooner keeps its earlier time.
      if (row.retireAfter !== null && row.retireAfter <= retireOthersAfter) continue;
      changes.push({
        field: `secrets.${row.secretId}.retireAfter`,
        from: row.retireAfter?.toISOString() ?? null,
        to: retireOthersAfter.toISOString(),
      });
      if (!this.#dryRun) await setSecretRetireAfter(this.#client, row.sourceId, row.secretId, retireOthersAfter);
      row.retireAfter = retireOthersAfter;
    }
    const added = await this.#insertSecret(loaded.row.id, { id: secretId, value });
    loaded.secretRows.push(added);
    this.#values.set(loaded.row.id, values);
    changes.unshift({ field: `secrets.${secretId}`, to: SECRET_LISTED(added) });
    await this.#saveRow(loaded, loaded.spec, loaded.row.enabled);
    this.audits.push({ action: 'rotate', sourceId: loaded.row.id, diff: changes });
  }

  /** Makes each desired source so (secrets to the file's values), deleting the others when `prune`. */
  async apply(desired: DesiredSource[], prune: boolean): Promise<PlannedChange[]> {
    const planned: PlannedChange[] = [];
    const wanted = new Set(desired.map((d) => d.spec.id));
    for (const d of desired) {
      const loaded = this.#set.get(d.spec.id);
      if (loaded === undefined) {
        planned.push({ action: 'create', sourceId: d.spec.id, changes: await this.create(d, true) });
        continue;
      }
      this.#check(d.spec, d.secrets);
      const changes = specChanges(loaded.spec, d.spec);
      const stored = this.#secretsOf(loaded);
      const byId = new Map(loaded.secretRows.map((r) => [r.secretId, r]));
      for (const secret of d.secrets) {
        const row = byId.get(secret.id);
        const retire = secret.retireAfter === undefined ? null : new Date(secret.retireAfter);
        if (row === undefined) {
          const added = await this.#insertSecret(loaded.row.id, secret);
          loaded.secretRows.push(added);
          changes.push({ field: `secrets.${secret.id}`, to: SECRET_LISTED(added) });
          continue;
        }
        if (stored.find((s) => s.id === secret.id)?.value !== secret.value) {
          changes.push({ field: `secrets.${secret.id}.value`, from: '(sealed)', to: '(sealed, changed)' });
          const { keyId, sealed } = sealSecret(this.#keys(), loaded.row.id, secret.id, secret.value);
          if (!this.#dryRun) await resealSecretRow(this.#client, loaded.row.id, secret.id, keyId, sealed);
        }
        if ((row.retireAfter?.getTime() ?? null) !== (retire?.getTime() ?? null)) {
          changes.push({
            field: `secrets.${secret.id}.retireAfter`,
            from: row.retireAfter?.toISOString() ?? null,
            to: retire?.toISOString() ?? null,
          });
          if (!this.#dryRun) await setSecretRetireAfter(this.#client, loaded.row.id, secret.id, retire);
          row.retireAfter = retire;
        }
      }
      for (const row of [...loaded.secretRows]) {
        if (d.secrets.some((s) => s.id === row.secretId)) continue;
        changes.push({ field: `secrets.${row.secretId}`, from: SECRET_LISTED(row) });
        if (!this.#dryRun) await deleteSecretRow(this.#client, loaded.row.id, row.secretId);
        loaded.secretRows.splice(loaded.secretRows.indexOf(row), 1);
      }
      this.#values.set(
        loaded.row.id,
        d.secrets.map((s) => ({ id: s.id, value: s.value })),
      );
      if (changes.length === 0) {
        planned.push({ action: 'unchanged', sourceId: d.spec.id, changes });
        continue;
      }
      await this.#saveRow(loaded, d.spec, loaded.row.enabled);
      loaded.spec = d.spec;
      this.audits.push({ action: 'apply', sourceId: d.spec.id, diff: changes });
      planned.push({ action: 'update', sourceId: d.spec.id, changes });
    }
    if (prune)
      for (const loaded of [...this.#set.values()]) {
        if (wanted.has(loaded.row.id)) continue;
        await this.remove(loaded);
        planned.push({ action: 'delete', sourceId: loaded.row.id, changes: specChanges(loaded.spec, undefined) });
      }
    if (this.#dryRun) {
      const problems = sourceSetProblems(this.finalSet());
      if (problems.length > 0) throw new SourceInputError(422, problems);
    }
    return planned;
  }

  async rekey(): Promise<number> {
    const keys = this.#keys();
    let count = 0;
    for (const loaded of this.#set.values()) {
      const values = this.#secretsOf(loaded);
      for (const row of loaded.secretRows) {
        if (row.keyId === keys.activeKeyId) continue;
        const { keyId, sealed } = sealSecret(keys, row.sourceId, row.secretId, values.find((v) => v.id === row.secretId)!.value);
        await resealSecretRow(this.#client, row.sourceId, row.secretId, keyId, sealed);
        this.audits.push({
          action: 'rekey',
          sourceId: row.sourceId,
          diff: [{ field: `secrets.${row.secretId}.keyId`, from: row.keyId, to: keyId }],
        });
        count += 1;
      }
    }
    return count;
  }
}
