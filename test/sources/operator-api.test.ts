// The operator API (/api/v1 in the console) on the real Postgres, the console started in-process:
// tokens and their scopes, bad input answered with the field that is wrong, revisions (428, 412),
// the audit log under the token's name, and no secret value in any answer, log line or audit row.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '#plumbing/logging/logger.ts';
import { startConsole, type ConsoleHandle } from '#services/console/console.ts';
import { tokenDigest } from '#services/console/api/auth.ts';
import { keyringFromEnv } from '#domain/sources/index.ts';
import { insertTokenRow, reportInstance, revokeTokenRow } from '#domain/store/sources.ts';
import { useTestDatabase } from '../kit/db.ts';
import { topicNames } from '#plumbing/kafka/topics.ts';
import { consoleTestConfig } from '../kit/console.ts';

const keyring = keyringFromEnv({ BRIDGE_SECRET_KEYS: `k1:${randomBytes(32).toString('base64')}` })!;
/** Every secret value the run handles: none may appear in an answer, a log line or the audit log. */
const secretValues: string[] = [];
const answers: string[] = [];
const logLines: string[] = [];
const secret = () => {
  const value = `sv-${randomBytes(16).toString('hex')}`;
  secretValues.push(value);
  return value;
};
const newToken = () => `bt_${randomBytes(24).toString('base64url')}`;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any;
}

function call(
  base: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string>; localAddress?: string } = {},
): Promise<Answer> {
  const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  const headers: Record<string, string> = {
    ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
    ...options.headers,
  };
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}${path}`,
      { method, headers, ...(options.localAddress ? { localAddress: options.localAddress } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          answers.push(text, JSON.stringify(res.headers));
          let json: unknown;
          try {
            json = text === '' ? undefined : JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode!, headers: res.headers, text, json });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const db = useTestDatabase();
let api: ConsoleHandle;
let gated: ConsoleHandle;
let keyless: ConsoleHandle;
const writer = { name: 'ci-writer', token: newToken() };
const reader = { name: 'dashboard-reader', token: newToken() };
const revoked = { name: 'old-laptop', token: newToken() };

const spec = (id: string, extra: Record<string, unknown> = {}) => ({ id, tenants: [`t_${id}`], resourceTypes: ['theme'], ...extra });

beforeAll(async () => {
  for (const [t, scope] of [
    [writer, 'write'],
    [reader, 'read'],
    [revoked, 'write'],
  ] as const)
    expect(await insertTokenRow(db.pool, { name: t.name, sha256: tokenDigest(t.token), scope })).toBe(true);
  await revokeTokenRow(db.pool, revoked.name);

  const logs = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  const logger = createLogger({ name: 'console-api-test', level: 'debug' }, logs);
  const base = consoleTestConfig({
    operatorToken: 'operator-api-test-console-token',
    databaseUrl: db.url,
    names: topicNames({ events: 'api.events', applied: 'api.applied', retryLevels: 1 }),
    group: 'operator-api-test',
    logLevel: 'debug',
    allowedHosts: ['console.api.test'],
    secretKeyring: keyring,
  });
  api = await startConsole(base, { logger, env: {} });
  gated = await startConsole({ ...base, signInToRead: true }, { logger, env: {} });
  keyless = await startConsole({ ...base, secretKeyring: undefined }, { logger, env: {} });
});

afterAll(async () => {
  await api?.close();
  await gated?.close();
  await keyless?.close();
});

const w = (method: string, path: string, options: Parameters<typeof call>[3] = {}) =>
  call(api.url, method, path, { token: writer.token, ...options });

describe('operator API', () => {
  it('creates a source with a generated secret, shown once and never again', async () => {
    const created = await w('POST', '/api/v1/sources', { body: { ...spec('acme'), secrets: [{ id: 'acme-1', generate: true }] } });
    expect(created.status).toBe(201);
    expect(created.headers.location).toBe('/api/v1/sources/acme');
    expect(created.headers.etag).toBe('"1"');
    expect(created.headers['cache-control']).toBe('no-store');
    expect(created.json.generatedSecrets).toHaveLength(1);
    const value = created.json.generatedSecrets[0].value as string;
    secretValues.push(value);
    expect(created.json.generatedSecrets[0].id).toBe('acme-1');
    expect(value.length).toBeGreaterThanOrEqual(16);
    expect(JSON.stringify(created.json.source)).not.toContain(value);

    const got = await w('GET', '/api/v1/sources/acme');
    expect(got.status).toBe(200);
    expect(got.headers.etag).toBe('"1"');
    expect(got.json).toMatchObject({ id: 'acme', enabled: true, revision: 1, secrets: [{ id: 'acme-1', keyId: 'k1', state: 'active' }] });
    expect(got.text).not.toContain(value);
    const list = await w('GET', '/api/v1/sources');
    expect(list.json.sources.map((s: { id: string }) => s.id)).toEqual(['acme']);
    expect(list.json.configVersion).toBeGreaterThanOrEqual(1);
    expect(list.text).not.toContain(value);
  });

  it('creates a source with a given secret, and refuses a second one with its id (409)', async () => {
    const given = secret();
    const created = await w('POST', '/api/v1/sources', { body: { ...spec('globex'), secrets: [{ id: 'g1', value: given }] } });
    expect(created.status).toBe(201);
    expect(created.json.generatedSecrets).toEqual([]);
    expect(created.text).not.toContain(given);
    const again = await w('POST', '/api/v1/sources', { body: { ...spec('globex'), secrets: [{ id: 'g2', value: secret() }] } });
    expect(again.status).toBe(409);
    expect(again.json).toMatchObject({ error: 'exists' });
  });

  it('answers bad input with the field that is wrong, and changes nothing', async () => {
    const before = (await w('GET', '/api/v1/config')).json.configVersion as number;
    const create = (body: Record<string, unknown>) =>
      w('POST', '/api/v1/sources', { body: { ...body, secrets: body.secrets ?? [{ id: 's', value: secret() }] } });

    const unknown = await create({ ...spec('b1'), colour: 'red' });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error).toBe('invalid');
    expect(unknown.json.problems[0].message).toContain('colour');

    const short = await create({ ...spec('b2'), secrets: [{ id: 's', value: 'short' }] });
    expect(short.status).toBe(422);
    expect(short.json.problems).toEqual([expect.objectContaining({ path: 'secrets.0.value' })]);
    expect(short.text).not.toContain('"short"');

    const plainHttp = await create({ ...spec('b3'), reconcile: { url: 'http://provider.example/themes/{id}' } });
    expect(plainHttp.status).toBe(422);
    expect(plainHttp.json.problems).toEqual([expect.objectContaining({ path: 'reconcile.url' })]);

    const badSchema = await create({ ...spec('b4'), strictSchemas: { theme: { type: 'no-such-type' } } });
    expect(badSchema.status).toBe(422);
    expect(badSchema.json.problems).toEqual([expect.objectContaining({ path: 'strictSchemas.theme' })]);

    expect((await create({ id: 'ord1', tenants: ['shared_t'], resourceTypes: ['palette'] })).status).toBe(201);
    const conflict = await create({ id: 'ord2', tenants: ['shared_t'], resourceTypes: ['palette'], ordering: 'occurred_at' });
    expect(conflict.status).toBe(422);
    expect(conflict.json.problems[0].message).toMatch(/source "ord2" .* by occurred_at, source "ord1" by version/);

    const leak = secret();
    const unparseable = await w('POST', '/api/v1/sources', { raw: `{"id":"b5","secrets":[{"id":"s","value":"${leak}"}] x}` });
    expect(unparseable.status).toBe(400);
    expect(unparseable.json.error).toBe('invalid_json');
    expect(unparseable.json.message).toMatch(/^the body is not valid JSON: .*position \d+/);

    const form = await w('POST', '/api/v1/sources', { raw: 'id=b6', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(form.status).toBe(415);
    const huge = await w('POST', '/api/v1/sources', { body: { ...spec('b7'), padding: 'x'.repeat(200_000) } });
    expect(huge.status).toBe(413);
    const badId = await w('GET', '/api/v1/sources/not%20an%20id');
    expect(badId.status).toBe(400);
    expect(badId.json.problems[0].path).toBe('id');
    expect((await w('GET', '/api/v1/sources/nobody')).status).toBe(404);

    // Only the one good create (ord1) moved the version.
    expect((await w('GET', '/api/v1/config')).json.configVersion).toBe(before + 1);
    expect((await w('GET', '/api/v1/sources')).json.sources.map((s: { id: string }) => s.id)).toEqual(['acme', 'globex', 'ord1']);
  });

  it('changes a source only with the revision it read: 428 without If-Match, 412 when stale', async () => {
    const current = await w('GET', '/api/v1/sources/globex');
    const edit = { ...current.json.spec, toleranceSeconds: 120 };
    const blind = await w('PUT', '/api/v1/sources/globex', { body: edit });
    expect(blind.status).toBe(428);
    expect(blind.json.error).toBe('precondition_required');

    const put = await w('PUT', '/api/v1/sources/globex', { body: edit, headers: { 'if-match': current.headers.etag! } });
    expect(put.status).toBe(200);
    expect(put.json.spec.toleranceSeconds).toBe(120);
    expect(put.headers.etag).toBe(`"${put.json.revision}"`);

    const stale = await w('PUT', '/api/v1/sources/globex', {
      body: { ...edit, toleranceSeconds: 60 },
      headers: { 'if-match': current.headers.etag! },
    });
    expect(stale.status).toBe(412);
    expect(stale.json.error).toBe('stale_revision');
    expect((await w('GET', '/api/v1/sources/globex')).json.spec.toleranceSeconds).toBe(120);

    const unknownField = await w('PUT', '/api/v1/sources/globex', {
      body: { ...edit, secrets: [] },
      headers: { 'if-match': put.headers.etag! },
    });
    expect(unknownField.status).toBe(400);
    expect(unknownField.json.problems[0].message).toContain('secrets');

    // Disable, enable, rotate and delete carry the revision too.
    expect((await w('POST', '/api/v1/sources/globex/disable')).status).toBe(428);
    const disabled = await w('POST', '/api/v1/sources/globex/disable', { headers: { 'if-match': put.headers.etag! } });
    expect(disabled.status).toBe(200);
    expect(disabled.json.enabled).toBe(false);
    expect((await w('POST', '/api/v1/sources/globex/enable', { headers: { 'if-match': put.headers.etag! } })).status).toBe(412);
    const enabled = await w('POST', '/api/v1/sources/globex/enable', { headers: { 'if-match': disabled.headers.etag! } });
    expect(enabled.json.enabled).toBe(true);

    const retire = new Date(Date.now() + 3_600_000).toISOString();
    const rotated = await w('POST', '/api/v1/sources/globex/rotate', {
      body: { secretId: 'g2', generate: true, retireOthersAfter: retire },
      headers: { 'if-match': enabled.headers.etag! },
    });
    expect(rotated.status).toBe(200);
    expect(rotated.json.secretId).toBe('g2');
    expect(rotated.json.generatedSecrets).toHaveLength(1);
    secretValues.push(rotated.json.generatedSecrets[0].value);
    expect(rotated.json.source.secrets.map((s: { id: string; state: string }) => [s.id, s.state])).toEqual([
      ['g1', 'retiring'],
      ['g2', 'active'],
    ]);
    const given = secret();
    const rotatedGiven = await w('POST', '/api/v1/sources/globex/rotate', {
      body: { secretId: 'g3', value: given, retireOthersAfter: retire },
      headers: { 'if-match': rotated.headers.etag! },
    });
    expect(rotatedGiven.status).toBe(200);
    expect(rotatedGiven.json.generatedSecrets).toEqual([]);

    expect((await w('DELETE', '/api/v1/sources/ord1')).status).toBe(428);
    const ord1 = await w('GET', '/api/v1/sources/ord1');
    expect((await w('DELETE', '/api/v1/sources/ord1', { headers: { 'if-match': ord1.headers.etag! } })).status).toBe(204);
    expect((await w('GET', '/api/v1/sources/ord1')).status).toBe(404);
    expect((await w('PATCH', '/api/v1/sources/globex')).status).toBe(405);
  });

  it('takes only live tokens, and changes only with a write token', async () => {
    const none = await call(api.url, 'GET', '/api/v1/sources', { localAddress: '127.0.0.2' });
    expect(none.status).toBe(401);
    expect(none.json).toMatchObject({ error: 'unauthorized' });
    expect(none.headers['www-authenticate']).toMatch(/^Bearer realm=/);
    const gone = await call(api.url, 'GET', '/api/v1/sources', { token: revoked.token, localAddress: '127.0.0.2' });
    expect(gone.status).toBe(401);
    expect(gone.headers['www-authenticate']).toMatch(/^Bearer .*error="invalid_token"/);
    const guessed = await call(api.url, 'GET', '/api/v1/sources', { token: newToken(), localAddress: '127.0.0.2' });
    expect(guessed.status).toBe(401);

    expect((await call(api.url, 'GET', '/api/v1/sources', { token: reader.token })).status).toBe(200);
    const refused = await call(api.url, 'POST', '/api/v1/sources', {
      token: reader.token,
      body: { ...spec('by-reader'), secrets: [{ id: 's', value: secret() }] },
    });
    expect(refused.status).toBe(403);
    expect(refused.json.error).toBe('forbidden');
    expect(refused.headers['www-authenticate']).toContain('insufficient_scope');
    expect((await w('GET', '/api/v1/sources/by-reader')).status).toBe(404);
  });

  it('throttles a client whose tokens keep failing (429, Retry-After), and only that client', async () => {
    const from = '127.0.0.3';
    for (let i = 0; i < 5; i += 1)
      expect((await call(api.url, 'GET', '/api/v1/sources', { token: newToken(), localAddress: from })).status).toBe(401);
    const throttled = await call(api.url, 'GET', '/api/v1/sources', { token: writer.token, localAddress: from });
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    expect((await call(api.url, 'GET', '/api/v1/sources', { token: writer.token, localAddress: '127.0.0.4' })).status).toBe(200);
  });

  it('sits behind the console Host check, and never behind its sign-in redirect', async () => {
    const foreign = await call(api.url, 'GET', '/api/v1/sources', { token: writer.token, headers: { host: 'attacker.example' } });
    expect(foreign.status).toBe(421);
    expect((await call(api.url, 'GET', '/api/v1/sources', { token: writer.token, headers: { host: 'console.api.test' } })).status).toBe(
      200,
    );

    const noToken = await call(gated.url, 'GET', '/api/v1/sources', { localAddress: '127.0.0.5' });
    expect(noToken.status).toBe(401);
    expect(noToken.headers.location).toBeUndefined();
    expect((await call(gated.url, 'GET', '/api/v1/sources', { token: reader.token })).status).toBe(200);
    const nowhere = await call(gated.url, 'GET', '/api/v1/nowhere', { token: reader.token });
    expect(nowhere.status).toBe(404);
    expect(nowhere.json.error).toBe('not_found');
    // The console's pages still ask for a sign-in.
    expect((await call(gated.url, 'GET', '/')).status).toBe(303);
  });

  it('without BRIDGE_SECRET_KEYS reads, and refuses a change that seals a secret (503)', async () => {
    expect((await call(keyless.url, 'GET', '/api/v1/sources', { token: reader.token })).status).toBe(200);
    const refused = await call(keyless.url, 'POST', '/api/v1/sources', {
      token: writer.token,
      body: { ...spec('keyless'), secrets: [{ id: 's', value: secret() }] },
    });
    expect(refused.status).toBe(503);
    expect(refused.json).toMatchObject({ error: 'no_secret_key' });
    expect(refused.json.message).toContain('BRIDGE_SECRET_KEYS');
  });

  it('keeps every change in the audit log under the token name, with no secret value', async () => {
    const audit = await w('GET', '/api/v1/audit?source=globex');
    expect(audit.status).toBe(200);
    expect(audit.json.entries.map((e: { action: string }) => e.action)).toEqual([
      'rotate',
      'rotate',
      'enable',
      'disable',
      'update',
      'create',
    ]);
    expect(new Set(audit.json.entries.map((e: { actor: string }) => e.actor))).toEqual(new Set([writer.name]));

    const all = await w('GET', '/api/v1/audit?limit=500');
    expect(all.json.entries.map((e: { action: string; sourceId: string }) => `${e.action} ${e.sourceId}`).sort()).toEqual(
      [
        'create acme',
        'create globex',
        'create ord1',
        'delete ord1',
        'disable globex',
        'enable globex',
        'rotate globex',
        'rotate globex',
        'update globex',
      ].sort(),
    );
    const page = await w('GET', '/api/v1/audit?limit=2');
    expect(page.json.entries).toHaveLength(2);
    const next = await w('GET', `/api/v1/audit?limit=2&before=${page.json.nextBefore}`);
    expect(next.json.entries[0].id).toBeLessThan(page.json.entries[1].id);
    expect((await w('GET', '/api/v1/audit?limit=0')).status).toBe(400);
    expect((await w('GET', '/api/v1/audit?colour=red')).status).toBe(400);

    const rows = await db.pool.query('SELECT * FROM bridge_audit_log');
    expect(rows.rows.length).toBe(9);
    const table = JSON.stringify(rows.rows);
    for (const value of secretValues) expect(table).not.toContain(value);
  });

  it('lists the instances serving the configuration, flagging a laggard', async () => {
    const version = (await w('GET', '/api/v1/config')).json.configVersion as number;
    await reportInstance(db.pool, { instance: 'ingress-a', role: 'ingress', configVersion: version });
    await reportInstance(db.pool, { instance: 'worker-b', role: 'worker', configVersion: version - 1 });
    const config = await call(api.url, 'GET', '/api/v1/config', { token: reader.token });
    expect(config.status).toBe(200);
    expect(config.json.configVersion).toBe(version);
    expect(config.json.instances.map((i: { instance: string; behind: boolean }) => [i.instance, i.behind])).toEqual([
      ['ingress-a', false],
      ['worker-b', true],
    ]);
  });

  it('serves its OpenAPI document, and answers as the document says', async () => {
    const doc = await call(api.url, 'GET', '/api/v1/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.json.openapi).toBe('3.1.0');
    expect(Object.keys(doc.json.paths)).toEqual(
      expect.arrayContaining(['/api/v1/sources', '/api/v1/sources/{id}', '/api/v1/sources/{id}/rotate', '/api/v1/audit', '/api/v1/config']),
    );
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    ajv.addSchema({ $id: 'doc', components: doc.json.components });
    const check = (name: string, value: unknown) => {
      const validate = ajv.getSchema(`doc#/components/schemas/${name}`)!;
      expect(validate(value), `${name}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    };
    check('SourceList', (await w('GET', '/api/v1/sources')).json);
    check('SourceView', (await w('GET', '/api/v1/sources/globex')).json);
    check('AuditList', (await w('GET', '/api/v1/audit')).json);
    check('Config', (await w('GET', '/api/v1/config')).json);
    check('Error', (await w('GET', '/api/v1/sources/nobody')).json);
  });

  it('lets no secret value out: not in an answer, not in a log line', () => {
    expect(secretValues.length).toBeGreaterThan(5);
    expect(logLines.some((l) => l.includes('operator API change'))).toBe(true);
    const everything = [...answers, ...logLines].join('\n');
    for (const value of secretValues) expect(everything.replaceAll(generatedAnswers(), '')).not.toContain(value);
  });
});

/** The answers that carried a generated value, by design (created, rotated): removed before the grep. */
function generatedAnswers(): RegExp {
  return /"generatedSecrets":\[\{"id":"[^"]*","value":"[^"]*"\}\]/g;
}
