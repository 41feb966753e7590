// What an operator's pull may ask and what an answer may apply: a version with nothing known to
// bound it, an answer about another resource, and ids the contract refuses. Real ingress, worker,
// broker and Postgres; the provider's API is a real HTTP server; `bridge reconcile` runs as a
// subprocess and the console as a real server.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { startConsole, type ConsoleHandle } from '#services/console/console.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { freshEventId, freshId, hmacSource, SECRET_A, useHarness } from '../kit/harness.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { testBrokers } from '../kit/kafka.ts';
import { eventually } from '../kit/eventually.ts';
import { useProviderApi, reconcileSource } from '../kit/provider-api.ts';

const TENANT = 'tenant_doors';
const OPERATOR_TOKEN = 'answer-doors-operator-token';
const data = (name: string) => ({ ...sampleThemeEvent().data, name });

const api = useProviderApi();
const h = useHarness(
  () => ({
    sources: [hmacSource('prov', SECRET_A, [TENANT])],
    worker: {
      reconcile: { concurrency: 2, queueLimit: 100, sources: [reconcileSource('prov', [TENANT], `${api.url}/api/{tenant}/{type}s/{id}`)] },
    },
  }),
  { timeoutMs: 120_000 },
);
let env: Record<string, string>;
let sourcesFile: string;

beforeAll(() => {
  sourcesFile = path.join(mkdtempSync(path.join(tmpdir(), 'answer-doors-')), 'sources.json');
  writeFileSync(
    sourcesFile,
    JSON.stringify({
      sources: [
        {
          id: 'prov',
          secrets: [{ id: 'k1', env: 'UNUSED_SIGNING_SECRET' }],
          tenants: [TENANT],
          reconcile: { url: `${api.url}/api/{tenant}/{type}s/{id}`, attempts: 1 },
        },
      ],
    }),
  );
  env = {
    ...bridgeEnv({ brokers: testBrokers(), databaseUrl: h.db.url, events: h.names.events, applied: h.names.applied }),
    WEBHOOK_SOURCES_FILE: sourcesFile,
  };
});

const post = async (event: object) => expect((await h.post('prov', JSON.stringify(event))).status).toBe(202);
const event = (id: string, version: number, type: 'created' | 'updated', name = `v${version}`) => ({
  ...sampleThemeEvent({ tenant_id: TENANT, event_type: `theme.${type}`, resource: { type: 'theme', id, version }, data: data(name) }),
  event_id: freshEventId(),
});
/** What `bridge reconcile --json` reported when it exited 1 (stderr: the error and the report). */
const failedReport = (run: { stderr: string }) =>
  (JSON.parse(run.stderr) as { details: { outcome: string; published: boolean; reason: string } }).details;
const reconcileRows = async (id: string) =>
  (
    await h.db.pool.query<{ status: string }>(
      `SELECT status FROM inbox_events WHERE tenant_id = $1 AND resource_id = $2 AND source = 'reconcile'`,
      [TENANT, id],
    )
  ).rows;

describe("an operator's pull of a resource the bridge never saw", () => {
  it('refuses a sentinel version (2^53-1) as implausible: nothing sent, and the first real event applies', async () => {
    const id = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { version: Number.MAX_SAFE_INTEGER, data: data('sentinel') } });
    const before = await h.eventsCount();
    const run = await runBridge(['reconcile', TENANT, 'theme', id, '--json'], env);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    expect(failedReport(run)).toMatchObject({ outcome: 'implausible', published: false });
    expect(failedReport(run).reason).toMatch(/maxVersionLead/);
    expect(await h.eventsCount()).toBe(before);
    await post(event(id, 1, 'created', 'real v1'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 1, { timeoutMs: 30_000, message: 'v1 applied' });
    expect(await reconcileRows(id)).toEqual([]);
  });

  it('applies a version within maxVersionLead of nothing (the bound starts at 0)', async () => {
    const id = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { version: 12, data: data('pulled v12') } });
    const run = await runBridge(['reconcile', TENANT, 'theme', id, '--json'], env);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.json()).toMatchObject({ outcome: 'applied', published: true });
    await eventually(async () => (await h.state(TENANT, id))?.version === 12, { timeoutMs: 30_000, message: 'v12 applied' });
  });
});

describe("an answer about another resource than the one asked (the answer's own tenant, type and id)", () => {
  const cases: Array<[string, (id: string) => object]> = [
    ['another resource.id', () => ({ resource: { type: 'theme', id: 'thm_someone_else', version: 5 }, data: data('other id') })],
    ['another tenant_id', (id) => ({ tenant_id: 'tenant_other', resource: { type: 'theme', id, version: 5 }, data: data('other tenant') })],
    ['another resource.type', (id) => ({ resource: { type: 'palette', id, version: 5 }, data: data('other type') })],
    ['another top-level id', () => ({ id: 'thm_someone_else', version: 5, data: data('other top-level id') })],
  ];
  for (const [what, body] of cases) {
    it(`is refused as invalid when it states ${what}: nothing sent`, async () => {
      const id = freshId('thm');
      await post(event(id, 1, 'created'));
      await eventually(async () => (await h.state(TENANT, id))?.version === 1, { message: 'v1 applied' });
      api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: body(id) });
      const before = await h.eventsCount();
      const run = await runBridge(['reconcile', TENANT, 'theme', id, '--json'], env);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(failedReport(run)).toMatchObject({ outcome: 'invalid', published: false });
      expect(failedReport(run).reason).toMatch(/^answer_identity: /);
      expect(await h.eventsCount()).toBe(before);
      expect((await h.state(TENANT, id))!.version).toBe(1);
    });
  }

  it("a 410 stating another resource's deletion is no tombstone for this one", async () => {
    const id = freshId('thm');
    await post(event(id, 1, 'created'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 1, { message: 'v1 applied' });
    api.replies.set(`/api/${TENANT}/themes/${id}`, {
      status: 410,
      body: { resource: { type: 'theme', id: 'thm_someone_else', version: 9 } },
    });
    const run = await runBridge(['reconcile', TENANT, 'theme', id, '--json'], env);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    expect(failedReport(run)).toMatchObject({ outcome: 'invalid', published: false });
    expect(await h.state(TENANT, id)).toMatchObject({ version: 1, deleted: false });
  });

  it('the same identity as asked applies, and a pull the worker owes is refused the same way', async () => {
    const id = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${id}`, {
      status: 200,
      body: { tenant_id: TENANT, id, type: 'theme', resource: { type: 'theme', id, version: 2 }, data: data('same identity') },
    });
    const run = await runBridge(['reconcile', TENANT, 'theme', id, '--json'], env);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    await eventually(async () => (await h.state(TENANT, id))?.version === 2, { timeoutMs: 30_000, message: 'v2 applied' });

    // An unseen update triggers the worker's pull; the API answers about another resource.
    const other = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${other}`, {
      status: 200,
      body: { resource: { type: 'theme', id, version: 8 }, data: data('x') },
    });
    await post(event(other, 3, 'updated', 'pushed v3'));
    await eventually(
      async () =>
        (
          await h.db.pool.query('SELECT 1 FROM reconcile_pulls WHERE tenant_id = $1 AND resource_id = $2 AND status = $3', [
            TENANT,
            other,
            'failed',
          ])
        ).rowCount === 1,
      { timeoutMs: 30_000, message: 'the refused pull recorded for an operator' },
    );
    await h.settle();
    expect(await h.state(TENANT, other)).toMatchObject({ version: 3, data: { name: 'pushed v3' } });
    expect((await h.state(TENANT, id))!.version).toBe(2);
  });
});

describe('ids the contract refuses never reach the provider', () => {
  const bad = ['a b', 'thm/../x', 'x'.repeat(101), 'thm?x=1'];

  it('bridge reconcile refuses them before any request', async () => {
    for (const id of bad) {
      api.requests.length = 0;
      const run = await runBridge(['reconcile', TENANT, 'theme', id, '--dry-run'], env);
      expect(run.code, `${id}: ${run.stdout}${run.stderr}`).not.toBe(0);
      expect(run.stderr).toMatch(/resource id/);
      expect(api.requests, id).toEqual([]);
    }
  });

  it('the console refuses them before any request', async () => {
    let consoleHandle: ConsoleHandle | undefined;
    try {
      consoleHandle = await startConsole(
        {
          port: 0,
          host: '127.0.0.1',
          operatorToken: OPERATOR_TOKEN,
          brokers: testBrokers(),
          databaseUrl: h.db.url,
          statementTimeoutMs: 10_000,
          names: h.names,
          group: h.groupId,
          ingressMetricsUrl: `${h.ingress.adminUrl}/metrics`,
          logLevel: 'silent',
          sourcesFile,
        },
        { logger: createLogger({ name: 'answer-doors-console', level: 'silent' }), env: {} },
      );
      const url = consoleHandle.url;
      const signIn = await fetch(`${url}/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
        body: new URLSearchParams({ operator: 'ada', token: OPERATOR_TOKEN, next: '/' }).toString(),
      });
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
      const resourcePage = await (await fetch(`${url}/resource?tenant=${TENANT}&type=theme&id=thm_any`, { headers: { cookie } })).text();
      const csrf = /name="csrf" value="([^"]+)"/.exec(resourcePage)?.[1];
      expect(csrf, 'a csrf token on the signed-in resource page').toBeDefined();
      for (const id of bad) {
        api.requests.length = 0;
        const answer = await fetch(`${url}/resource/reconcile`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url, cookie },
          body: new URLSearchParams({ csrf: csrf!, tenant: TENANT, type: 'theme', id, source: 'prov' }).toString(),
        });
        expect(answer.status, id).toBe(400);
        expect(await answer.text()).toMatch(/resource id/);
        expect(api.requests, id).toEqual([]);
      }
    } finally {
      await consoleHandle?.close();
    }
  });
});
