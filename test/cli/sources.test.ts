import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyringFromEnv, openSecret } from '#domain/sources/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { repoRoot, DEV_SEED_ACTOR, seedDevSources } from '../kit/infra.ts';
import { useTestDatabase } from '../kit/db.ts';
import { runBridge, type BridgeRun } from '../kit/run-bridge.ts';

// `bridge sources` and `bridge tokens` as an operator runs them: a subprocess against real Postgres.
describe('bridge sources / tokens (as a subprocess)', () => {
  const db = useTestDatabase();
  let dir: string;
  let file: string;
  let env: Record<string, string>;
  const me = `cli:${os.userInfo().username}`;
  const secrets = {
    SHOP_SECRET: 'shop-secret-one-of-at-least-16-bytes',
    SHOP_EU_SECRET: 'shop-eu-secret-of-at-least-16-bytes',
    SHOP_SECRET_2: 'shop-secret-two-of-at-least-16-bytes',
    ROTATED_SECRET: 'rotated-secret-from-the-environment',
  };
  // Every output of the run, to look for secret values in.
  const outputs: string[] = [];
  const bridge = async (args: string[], extra: Record<string, string> = {}): Promise<BridgeRun> => {
    const run = await runBridge(args, { ...env, ...extra });
    outputs.push(run.stdout, run.stderr);
    return run;
  };
  const writeSources = (sources: unknown[]) => writeFileSync(file, JSON.stringify({ sources }, null, 2));
  const shop = (tenants: string[]) => ({
    id: 'shop',
    secrets: [{ id: 'shop-1', env: 'SHOP_SECRET' }],
    tenants,
    resourceTypes: ['theme', 'palette'],
  });
  const shopEu = { id: 'shop-eu', secrets: [{ id: 'shop-eu-1', env: 'SHOP_EU_SECRET' }], tenants: ['tenant_eu'] };
  /** Everything a write changes: rows, sealed values, the audit log, the configuration version. */
  const snapshot = async () =>
    (
      await db.pool.query(`SELECT
        (SELECT json_agg(s ORDER BY id) FROM bridge_sources s) AS sources,
        (SELECT json_agg(json_build_array(source_id, secret_id, encode(sealed, 'hex'), retire_after) ORDER BY source_id, secret_id)
           FROM bridge_source_secrets) AS secrets,
        (SELECT count(*)::int FROM bridge_audit_log) AS audit,
        (SELECT version FROM bridge_config) AS version`)
    ).rows[0];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'bridge-sources-'));
    file = path.join(dir, 'sources.json');
    env = {
      DATABASE_URL: db.url,
      BRIDGE_SECRET_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
      SHOP_SECRET: secrets.SHOP_SECRET,
      SHOP_EU_SECRET: secrets.SHOP_EU_SECRET,
    };
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('apply creates the sources of a file, printing the diff with secrets by id only', async () => {
    writeSources([shop(['tenant_acme']), shopEu]);
    const run = await bridge(['sources', 'apply', '-f', file]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^create shop\n/m);
    expect(run.stdout).toMatch(/^create shop-eu\n/m);
    expect(run.stdout).toContain('+ secrets: [{"id":"shop-1","keyId":"k1","retireAfter":null}]');
    expect(run.stdout).toContain('2 to create, 0 to update, 0 to delete, 0 unchanged');
    // The diff comes before the outcome.
    expect(run.stdout.indexOf('create shop')).toBeLessThan(run.stdout.indexOf('applied (configuration version 1)'));
    const { rows } = await db.pool.query('SELECT id, enabled FROM bridge_sources ORDER BY id');
    expect(rows).toEqual([
      { id: 'shop', enabled: true },
      { id: 'shop-eu', enabled: true },
    ]);
    const audit = await db.pool.query('SELECT actor, action, source_id FROM bridge_audit_log ORDER BY id');
    expect(audit.rows).toEqual([
      { actor: me, action: 'create', source_id: 'shop' },
      { actor: me, action: 'create', source_id: 'shop-eu' },
    ]);
  });

  it('apply again prints no change, changes nothing and exits 0', async () => {
    const before = await snapshot();
    const run = await bridge(['sources', 'apply', '-f', file]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('unchanged shop\nunchanged shop-eu\nno change (2 source(s) unchanged)\n');
    expect(await snapshot()).toEqual(before);
    const json = await bridge(['sources', 'apply', '-f', file, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(json.json()).toMatchObject({ dry_run: false, changed: 0, config_version: 1 });
  });

  it('apply --dry-run after an edit prints the diff and changes nothing (rows, secrets, audit)', async () => {
    writeSources([
      shop(['tenant_acme', 'tenant_beta']),
      shopEu,
      { id: 'shop-us', secrets: [{ id: 'us-1', env: 'SHOP_SECRET_2' }], tenants: ['tenant_us'] },
    ]);
    const before = await snapshot();
    // A changed secret value shows as changed, never as a value.
    const run = await bridge(['sources', 'apply', '-f', file, '--dry-run'], {
      SHOP_EU_SECRET: 'shop-eu-secret-changed-16-bytes+',
      SHOP_SECRET_2: secrets.SHOP_SECRET_2,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('update shop\n  ~ tenants: ["tenant_acme"] -> ["tenant_acme","tenant_beta"]\n');
    expect(run.stdout).toContain('update shop-eu\n  ~ secrets.shop-eu-1.value: "(sealed)" -> "(sealed, changed)"\n');
    expect(run.stdout).toMatch(/^create shop-us\n/m);
    expect(run.stdout).toContain('1 to create, 2 to update, 0 to delete, 0 unchanged\n(dry run: nothing changed)');
    expect(await snapshot()).toEqual(before);

    const json = await bridge(['sources', 'apply', '-f', file, '--dry-run', '--json'], { SHOP_SECRET_2: secrets.SHOP_SECRET_2 });
    expect(json.code, json.stderr).toBe(0);
    const plan = json.json();
    expect(plan).toMatchObject({ dry_run: true, changed: 2 });
    expect(plan.changes.map((c: any) => [c.action, c.sourceId])).toEqual([
      ['update', 'shop'],
      ['unchanged', 'shop-eu'],
      ['create', 'shop-us'],
    ]);
    expect(await snapshot()).toEqual(before);
  });

  it('a bad file is refused naming the field, and changes nothing', async () => {
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ sources: [{ ...shop(['tenant_acme']), colour: 'red' }] }));
    const before = await snapshot();
    const run = await bridge(['sources', 'apply', '-f', bad]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/colour/);
    expect(await snapshot()).toEqual(before);
    const missing = await bridge(['sources', 'apply', '-f', file]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('SHOP_SECRET_2');
    expect(await snapshot()).toEqual(before);
  });

  it('--prune deletes the sources the file does not name; without it they stay', async () => {
    writeSources([shop(['tenant_acme', 'tenant_beta'])]);
    const kept = await bridge(['sources', 'apply', '-f', file]);
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stdout).toContain('update shop\n');
    expect(kept.stdout).not.toContain('shop-eu');
    expect((await db.pool.query("SELECT 1 FROM bridge_sources WHERE id = 'shop-eu'")).rowCount).toBe(1);

    const dry = await bridge(['sources', 'apply', '-f', file, '--prune', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('unchanged shop\ndelete shop-eu\n0 to create, 0 to update, 1 to delete, 1 unchanged');
    expect((await db.pool.query("SELECT 1 FROM bridge_sources WHERE id = 'shop-eu'")).rowCount).toBe(1);

    const pruned = await bridge(['sources', 'apply', '-f', file, '--prune']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toContain('delete shop-eu\n');
    expect((await db.pool.query('SELECT id FROM bridge_sources')).rows).toEqual([{ id: 'shop' }]);
    const again = await bridge(['sources', 'apply', '-f', file, '--prune']);
    expect(again.stdout).toContain('no change (1 source(s) unchanged)');
  });

  it('rotate --generate prints the new value once; show, list and history never show a value', async () => {
    const run = await bridge([
      'sources',
      'rotate',
      'shop',
      '--generate',
      '--secret-id',
      'shop-2',
      '--retire-others-after',
      '2099-01-01T00:00:00Z',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const value = run.stdout.trim().split('\n').at(-1)!;
    expect(Buffer.from(value, 'base64url')).toHaveLength(32);
    expect(run.stdout.split(value)).toHaveLength(2);
    expect(run.stdout).toContain('secret shop-2 verifies now');
    expect(run.stdout).toContain('shop-1: retiring until 2099-01-01T00:00:00.000Z');
    // What is stored is what was printed, sealed.
    const { rows } = await db.pool.query(
      "SELECT key_id, sealed FROM bridge_source_secrets WHERE source_id = 'shop' AND secret_id = 'shop-2'",
    );
    expect(openSecret(keyringFromEnv(env)!, 'shop', 'shop-2', rows[0].key_id, rows[0].sealed)).toBe(value);

    const byEnv = await bridge(
      [
        'sources',
        'rotate',
        'shop',
        '--value-env',
        'ROTATED_SECRET',
        '--secret-id',
        'shop-3',
        '--retire-others-after',
        '2098-01-01T00:00:00Z',
        '--json',
      ],
      { ROTATED_SECRET: secrets.ROTATED_SECRET },
    );
    expect(byEnv.code, byEnv.stderr).toBe(0);
    expect(byEnv.json()).toMatchObject({ source: 'shop', secret_id: 'shop-3' });
    expect(byEnv.json().generated_value).toBeUndefined();

    const show = await bridge(['sources', 'show', 'shop']);
    const showJson = await bridge(['sources', 'show', 'shop', '--json']);
    const list = await bridge(['sources', 'list']);
    const listJson = await bridge(['sources', 'list', '--json']);
    for (const r of [show, showJson, list, listJson]) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).not.toContain(value);
    }
    expect(show.stdout).toMatch(/shop-1\s+k1\s+retiring\s+\S+\s+2098-01-01T00:00:00.000Z\s+-/);
    expect(list.stdout).toMatch(/shop-3\s+active/);
    expect(showJson.json().secrets.map((s: any) => [s.id, s.state, s.retireAfter, s.lastVerifiedAt])).toEqual([
      ['shop-1', 'retiring', '2098-01-01T00:00:00.000Z', null],
      ['shop-2', 'retiring', '2098-01-01T00:00:00.000Z', null],
      ['shop-3', 'active', null, null],
    ]);
    expect(listJson.json().sources[0].secrets).toHaveLength(3);

    const taken = await bridge([
      'sources',
      'rotate',
      'shop',
      '--generate',
      '--secret-id',
      'shop-3',
      '--retire-others-after',
      '2099-01-01T00:00:00Z',
    ]);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toMatch(/422[\s\S]*secretId: source "shop" already has a secret "shop-3"/);
    const both = await bridge([
      'sources',
      'rotate',
      'shop',
      '--generate',
      '--value-env',
      'X',
      '--retire-others-after',
      '2099-01-01T00:00:00Z',
    ]);
    expect(both.code).toBe(2);
    const before = await snapshot();
    const dry = await bridge(['sources', 'rotate', 'shop', '--generate', '--retire-others-after', '2097-01-01T00:00:00Z', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('(dry run: nothing changed)');
    expect(await snapshot()).toEqual(before);
    // The one output allowed to hold the generated value is the rotate that made it.
    expect(outputs.filter((o) => o.includes(value))).toEqual([run.stdout]);
  });

  it('disable and enable carry the revision read; a stale one is refused with 412', async () => {
    const revision = (await bridge(['sources', 'show', 'shop', '--json'])).json().revision as number;
    const dry = await bridge(['sources', 'disable', 'shop', '--dry-run']);
    expect(dry.stdout).toContain('would disable source shop');
    expect((await db.pool.query("SELECT enabled FROM bridge_sources WHERE id = 'shop'")).rows[0].enabled).toBe(true);

    const off = await bridge(['sources', 'disable', 'shop']);
    expect(off.code, off.stderr).toBe(0);
    expect(off.stdout).toBe(`source shop disabled (revision ${revision + 1})\n`);
    expect((await db.pool.query("SELECT enabled FROM bridge_sources WHERE id = 'shop'")).rows[0].enabled).toBe(false);
    expect((await bridge(['sources', 'disable', 'shop'])).stdout).toContain('already disabled; nothing changed');
    expect((await bridge(['sources', 'list'])).stdout).toMatch(/shop\s+no\s+/);

    const stale = await bridge(['sources', 'enable', 'shop', '--if-revision', String(revision)]);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toContain(`refused (412 stale_revision): source "shop" is at revision ${revision + 1}, not ${revision}`);
    const staleJson = await bridge(['sources', 'enable', 'shop', '--if-revision', String(revision), '--json']);
    expect(JSON.parse(staleJson.stderr)).toMatchObject({ details: { status: 412, code: 'stale_revision' } });

    const on = await bridge(['sources', 'enable', 'shop', '--json']);
    expect(on.code, on.stderr).toBe(0);
    expect(on.json()).toMatchObject({ source: 'shop', enabled: true, changed: true, revision: revision + 2 });
    // apply leaves enabled as operators set it, and gives a source exactly the file's secrets.
    await bridge(['sources', 'disable', 'shop']);
    const applied = await bridge(['sources', 'apply', '-f', file]);
    expect(applied.stdout).not.toMatch(/enabled/);
    expect(applied.stdout).toMatch(/^ {2}- secrets\.shop-2: /m);
    expect(applied.stdout).toMatch(/^ {2}~ secrets\.shop-1\.retireAfter: "2098-01-01T00:00:00.000Z" -> null$/m);
    expect((await db.pool.query("SELECT enabled FROM bridge_sources WHERE id = 'shop'")).rows[0].enabled).toBe(false);
    await bridge(['sources', 'enable', 'shop']);

    const unknown = await bridge(['sources', 'disable', 'nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('refused (404 not_found): no source "nope"');
  });

  it('history: every change with its actor and a diff that holds no secret value', async () => {
    const run = await bridge(['sources', 'history', 'shop', '--limit', '100', '--json']);
    expect(run.code, run.stderr).toBe(0);
    const entries = run.json().entries as Array<{ actor: string; action: string; sourceId: string }>;
    expect(entries.every((e) => e.actor === me && e.sourceId === 'shop')).toBe(true);
    expect(entries.map((e) => e.action).reverse()).toEqual([
      'create',
      'apply',
      'rotate',
      'rotate',
      'disable',
      'enable',
      'disable',
      'apply',
      'enable',
    ]);
    const text = await bridge(['sources', 'history', '--limit', '20']);
    expect(text.stdout).toMatch(
      new RegExp(`^#\\d+  \\S+  ${me}  enable shop  \\(configuration version \\d+\\)\n  ~ enabled: false -> true`, 'm'),
    );
    expect(text.stdout).toContain('delete shop-eu');
    const named = await bridge(['sources', 'disable', 'shop', '--json'], { BRIDGE_ACTOR: 'deploy-job' });
    expect(named.code, named.stderr).toBe(0);
    const last = (await bridge(['sources', 'history', '--limit', '1', '--json'])).json().entries[0];
    expect(last).toMatchObject({ actor: 'cli:deploy-job', action: 'disable', sourceId: 'shop' });
  });

  it('tokens: create prints the token once and stores its SHA-256; list never shows it; revoke', async () => {
    const created = await bridge(['tokens', 'create', 'deploy', '--scope', 'write']);
    expect(created.code, created.stderr).toBe(0);
    const token = created.stdout.trim().split('\n').at(-1)!;
    expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    const { rows } = await db.pool.query("SELECT scope, token_sha256 FROM bridge_operator_tokens WHERE name = 'deploy'");
    expect(rows[0].scope).toBe('write');
    expect(rows[0].token_sha256).toEqual(createHash('sha256').update(token).digest());

    const reader = await bridge(['tokens', 'create', 'dashboard', '--scope', 'read', '--json']);
    expect(reader.json()).toMatchObject({ name: 'dashboard', scope: 'read' });
    const readerToken = reader.json().token as string;
    expect((await bridge(['tokens', 'create', 'deploy', '--scope', 'read'])).code).toBe(1);
    expect((await bridge(['tokens', 'create', 'x', '--scope', 'admin'])).code).toBe(2);
    const before = (await db.pool.query('SELECT count(*)::int AS n FROM bridge_operator_tokens')).rows[0].n;
    expect((await bridge(['tokens', 'create', 'dry', '--scope', 'read', '--dry-run'])).code).toBe(0);
    expect((await db.pool.query('SELECT count(*)::int AS n FROM bridge_operator_tokens')).rows[0].n).toBe(before);

    const list = await bridge(['tokens', 'list']);
    const listJson = await bridge(['tokens', 'list', '--json']);
    for (const r of [list, listJson]) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).not.toContain(token);
      expect(r.stdout).not.toContain(readerToken);
    }
    expect(listJson.json().tokens.map((t: any) => [t.name, t.scope, t.revoked_at])).toEqual([
      ['dashboard', 'read', null],
      ['deploy', 'write', null],
    ]);

    const revoked = await bridge(['tokens', 'revoke', 'deploy']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect((await db.pool.query("SELECT revoked_at FROM bridge_operator_tokens WHERE name = 'deploy'")).rows[0].revoked_at).not.toBeNull();
    expect((await bridge(['tokens', 'list'])).stdout).toMatch(/deploy\s+write\s+\S+\s+-\s+\d{4}-/);
    expect((await bridge(['tokens', 'revoke', 'deploy'])).code).toBe(1);

    // Who may change sources is itself a change: each create and revoke has its audit row, no token in it.
    const audit = await db.pool.query("SELECT actor, action, diff FROM bridge_audit_log WHERE action LIKE 'token-%' ORDER BY id");
    expect(audit.rows.map((r) => [r.action, r.diff[0].to?.name ?? r.diff[0].from?.name])).toEqual([
      ['token-create', 'deploy'],
      ['token-create', 'dashboard'],
      ['token-revoke', 'deploy'],
    ]);
    expect(audit.rows.every((r) => String(r.actor).startsWith('cli:'))).toBe(true);
    expect(JSON.stringify(audit.rows)).not.toContain(token);
  });

  it('no output of the run holds a secret value from the environment', () => {
    for (const value of Object.values(secrets)) expect(outputs.filter((o) => o.includes(value))).toEqual([]);
    expect(outputs.filter((o) => o.includes('shop-eu-secret-changed'))).toEqual([]);
  });
});

// The "apply --dry-run on the dev file prints no change after npm start": npm start seeds
// the database with seedDevSources (infra/dev/up.ts), then the CLI with the dev env finds nothing to do.
describe('the dev seed (npm start) and bridge sources apply on the dev file', () => {
  const db = useTestDatabase();
  const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;

  it('seeds a fresh database from infra/dev/dev-sources.json; a dry run of the same file then prints no change', async () => {
    const logger = createLogger({ name: 'test', level: 'silent' });
    const seeded = await seedDevSources(db.url, logger, devEnv);
    expect(seeded.map((c) => c.action)).toEqual(['create', 'create', 'create', 'create', 'create']);
    const audit = await db.pool.query('SELECT DISTINCT actor FROM bridge_audit_log');
    expect(audit.rows).toEqual([{ actor: DEV_SEED_ACTOR }]);

    const run = await runBridge(['sources', 'apply', '--dry-run', '-f', 'infra/dev/dev-sources.json'], { ...devEnv, DATABASE_URL: db.url });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('no change (5 source(s) unchanged)');
    expect(run.stdout).not.toMatch(/^(create|update|delete) /m);
    // A second start seeds nothing.
    expect((await seedDevSources(db.url, logger, devEnv)).every((c) => c.action === 'unchanged')).toBe(true);
    expect((await db.pool.query('SELECT version FROM bridge_config')).rows[0].version).toBe('1');
  });
});
