// The one place that changes sources, on the real Postgres: revisions, whole-set rules, sealed
// secrets, the audit log and the declarative apply the CLI and the dev seeding use.
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { useTestDatabase } from '../kit/db.ts';
import type { CatalogError, SourceInputError } from '#domain/sources/index.ts';
import { keyringFromEnv, loadLiveSnapshot, SourceCatalog, storedSourceSchema, type DesiredSource } from '#domain/sources/index.ts';

const db = useTestDatabase();
let catalog: SourceCatalog;
const keyring = keyringFromEnv({ BRIDGE_SECRET_KEYS: `k1:${randomBytes(32).toString('base64')}` })!;
const values: string[] = [];
const secret = () => {
  const value = `sv-${randomBytes(16).toString('hex')}`;
  values.push(value);
  return value;
};

beforeAll(async () => {
  catalog = new SourceCatalog(db.pool, keyring);
});

const base = (id: string, extra: Record<string, unknown> = {}) => ({ id, tenants: [`t_${id}`], resourceTypes: ['theme'], ...extra });

async function problemOf(promise: Promise<unknown>): Promise<SourceInputError | CatalogError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  return error as SourceInputError | CatalogError;
}

describe('source catalog', () => {
  it('creates a source, seals its secret, and answers a stale write with 412', async () => {
    const { source, generated } = await catalog.create('tok-a', { ...base('alpha'), secrets: [{ id: 'a1', generate: true }] });
    expect(generated).toHaveLength(1);
    values.push(generated[0]!.value);
    expect(source.revision).toBe(1);
    expect(source.secrets.map((s) => [s.id, s.state])).toEqual([['a1', 'active']]);
    expect(JSON.stringify(source)).not.toContain(generated[0]!.value);

    const sealed = await db.pool.query<{ sealed: Buffer }>('SELECT sealed FROM bridge_source_secrets');
    expect(sealed.rows[0]!.sealed.includes(Buffer.from(generated[0]!.value))).toBe(false);

    const updated = await catalog.update('tok-a', 'alpha', 1, { ...base('alpha'), toleranceSeconds: 120 });
    expect(updated.revision).toBe(2);
    const stale = await problemOf(catalog.update('tok-b', 'alpha', 1, { ...base('alpha'), toleranceSeconds: 60 }));
    expect(stale).toMatchObject({ status: 412, code: 'stale_revision' });
    expect((await catalog.get('alpha')).spec.toleranceSeconds).toBe(120);
    expect((await problemOf(catalog.create('tok-a', { ...base('alpha'), secrets: [{ id: 'x', value: secret() }] }))).status).toBe(409);
  });

  it('refuses bad input with the field that is wrong, and changes nothing', async () => {
    const before = await catalog.configVersion();
    const unknownField = await problemOf(catalog.create('t', { ...base('b1'), colour: 'red', secrets: [{ id: 's', value: secret() }] }));
    expect(unknownField).toMatchObject({ status: 400 });
    expect((unknownField as SourceInputError).problems[0]!.message).toContain('colour');

    const short = await problemOf(catalog.create('t', { ...base('b2'), secrets: [{ id: 's', value: 'short' }] }));
    expect(short).toMatchObject({ status: 422, problems: [{ path: 'secrets.0.value' }] });

    const plainHttp = await problemOf(
      catalog.create('t', { ...base('b3'), reconcile: { url: 'http://provider.example/{id}' }, secrets: [{ id: 's', value: secret() }] }),
    );
    expect(plainHttp).toMatchObject({ status: 422, problems: [{ path: 'reconcile.url' }] });

    const badSchema = await problemOf(
      catalog.create('t', { ...base('b4'), strictSchemas: { theme: { type: 'no-such-type' } }, secrets: [{ id: 's', value: secret() }] }),
    );
    expect(badSchema).toMatchObject({ status: 422, problems: [{ path: 'strictSchemas.theme' }] });

    await catalog.create('t', { id: 'ord1', tenants: ['shared_t'], resourceTypes: ['palette'], secrets: [{ id: 's', value: secret() }] });
    const conflict = await problemOf(
      catalog.create('t', {
        id: 'ord2',
        tenants: ['shared_t'],
        resourceTypes: ['palette'],
        ordering: 'occurred_at',
        secrets: [{ id: 's', value: secret() }],
      }),
    );
    expect(conflict.status).toBe(422);
    expect(conflict.message).toMatch(/source "ord2" orders tenant "shared_t" type "palette" by occurred_at, source "ord1" by version/);

    const reused = values.at(-2)!;
    const shared = await problemOf(catalog.create('t', { ...base('b5'), secrets: [{ id: 's', value: reused }] }));
    expect(shared.status).toBe(422);
    expect(shared.message).toMatch(/has the same value as source "ord1"/);
    expect(shared.message).not.toContain(reused);

    // Only the one good create moved the version.
    expect(await catalog.configVersion()).toBe(before + 1);
    expect((await catalog.list()).map((s) => s.id)).toEqual(['alpha', 'ord1']);
  });

  it('rotates: the new secret verifies at once, the old ones until their retire time', async () => {
    const { source } = await catalog.create('t', { ...base('rot'), secrets: [{ id: 'r1', value: secret() }] });
    const retire = new Date(Date.now() + 60_000).toISOString();
    const rotated = await catalog.rotate('t', 'rot', source.revision, { secretId: 'r2', generate: true, retireOthersAfter: retire });
    values.push(rotated.generated!);
    expect(rotated.source.secrets.map((s) => [s.id, s.state, s.retireAfter])).toEqual([
      ['r1', 'retiring', retire],
      ['r2', 'active', null],
    ]);
    const snapshot = await loadLiveSnapshot(db.pool, keyring);
    const live = snapshot.sources.find((s) => s.id === 'rot')!;
    expect(live.secrets.map((s) => s.id)).toEqual(['r1', 'r2']);
    expect(live.secrets[0]!.retireAfter?.toISOString()).toBe(retire);
    expect(live.secrets[1]!.value).toBe(rotated.generated);
  });

  it('a disabled source leaves the live set; the audit log holds every change, never a value', async () => {
    const rot = await catalog.get('rot');
    await catalog.setEnabled('ops', 'rot', rot.revision, false);
    expect((await loadLiveSnapshot(db.pool, keyring)).sources.map((s) => s.id)).not.toContain('rot');
    const audit = await catalog.history({ sourceId: 'rot' });
    expect(audit.map((a) => [a.action, a.actor])).toEqual([
      ['disable', 'ops'],
      ['rotate', 't'],
      ['create', 't'],
    ]);
    const all = JSON.stringify(await db.pool.query('SELECT * FROM bridge_audit_log'));
    for (const value of values) expect(all).not.toContain(value);
  });

  it('apply is declarative and idempotent, and the plan changes nothing', async () => {
    const a = secret();
    const desired: DesiredSource[] = [
      { spec: storedSourceSchema.parse(base('decl')), secrets: [{ id: 'd1', value: a }] },
      { spec: storedSourceSchema.parse(base('alpha', { toleranceSeconds: 120 })), secrets: [{ id: 'a1', value: values[0]! }] },
    ];
    const first = await catalog.apply('cli:me', desired);
    expect(first.changes.map((c) => [c.sourceId, c.action])).toEqual([
      ['decl', 'create'],
      ['alpha', 'unchanged'],
    ]);
    const again = await catalog.apply('cli:me', desired);
    expect(again.changes.every((c) => c.action === 'unchanged')).toBe(true);
    expect(again.configVersion).toBe(first.configVersion);

    const edited: DesiredSource[] = [{ ...desired[0]!, secrets: [{ id: 'd1', value: secret() }] }, desired[1]!];
    const versionBefore = await catalog.configVersion();
    const plan = await catalog.plan(edited, { prune: true });
    expect(plan.map((c) => [c.sourceId, c.action])).toEqual([
      ['decl', 'update'],
      ['alpha', 'unchanged'],
      ['ord1', 'delete'],
      ['rot', 'delete'],
    ]);
    expect(plan[0]!.changes).toEqual([{ field: 'secrets.d1.value', from: '(sealed)', to: '(sealed, changed)' }]);
    expect(await catalog.configVersion()).toBe(versionBefore);
    expect((await catalog.list()).map((s) => s.id)).toContain('ord1');
    const live = await loadLiveSnapshot(db.pool, keyring);
    expect(live.sources.find((s) => s.id === 'decl')!.secrets[0]!.value).toBe(a);
  });

  it('notifies listeners at commit', async () => {
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    try {
      await listener.query('LISTEN bridge_config');
      const heard = new Promise<string>((resolve) => listener.once('notification', (m) => resolve(m.payload ?? '')));
      const alpha = await catalog.get('alpha');
      await catalog.update('t', 'alpha', alpha.revision, { ...base('alpha'), toleranceSeconds: 90 });
      expect(Number(await heard)).toBe(await catalog.configVersion());
    } finally {
      await listener.end();
    }
  });
});
