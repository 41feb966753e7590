// The resource page's Reconcile behind the same guard as the DLQ replay: no session, a stale or
// missing CSRF token, or another origin is refused before the provider's API is asked.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Kafka } from '#plumbing/kafka/types.ts';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '#plumbing/logging/logger.ts';
import type { ConsoleConfig } from './config.ts';
import { startConsole, type ConsoleHandle } from './console.ts';
import { SESSION_COOKIE } from './guard.ts';

const TOKEN = 'operator-token-0123456789';
const TENANT = 'tenant_guarded';
// Owned by source "second" only.
const SECOND_TENANT = 'tenant_second';

// Postgres answers nothing (an empty store); the broker is never reached (only dry runs here).
const pool = { query: async () => ({ rows: [] }), on: () => pool, end: async () => {} } as unknown as pg.Pool;
const clients = {
  pool,
  kafka: {} as Kafka,
  withAdmin: () => Promise.reject(new Error('no broker in this test')),
  logger: createLogger({ name: 'console-unit', level: 'silent' }),
};

let api: Server;
let requests = 0;
let consoleHandle: ConsoleHandle;
let bare: ConsoleHandle;

function config(sourcesFile?: string): ConsoleConfig {
  return {
    port: 0,
    host: '127.0.0.1',
    operatorToken: TOKEN,
    brokers: ['127.0.0.1:1'],
    databaseUrl: 'postgres://unused',
    statementTimeoutMs: 1000,
    names: { events: 'events', applied: 'applied', dlq: 'dlq', retries: [] } as unknown as ConsoleConfig['names'],
    group: 'g',
    ingressMetricsUrl: 'http://127.0.0.1:1/metrics',
    logLevel: 'silent',
    sourcesFile,
  };
}

beforeAll(async () => {
  api = createServer((_req, res) => {
    requests += 1;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ version: 3, data: { name: 'from the API' } }));
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  const { port } = api.address() as AddressInfo;
  const dir = mkdtempSync(path.join(tmpdir(), 'console-reconcile-'));
  const file = path.join(dir, 'sources.json');
  writeFileSync(
    file,
    JSON.stringify({
      sources: [
        {
          id: 'prov',
          secrets: [{ id: 'k1', env: 'UNUSED_SIGNING_SECRET' }],
          tenants: [TENANT],
          reconcile: { url: `http://127.0.0.1:${port}/api/{tenant}/{type}s/{id}`, auth: { env: 'PROVIDER_TOKEN', prefix: 'Bearer ' } },
        },
        {
          id: 'second',
          secrets: [{ id: 'k1', env: 'UNUSED_SIGNING_SECRET' }],
          tenants: [SECOND_TENANT],
          reconcile: { url: `http://127.0.0.1:${port}/api/{tenant}/{type}s/{id}`, auth: { env: 'PROVIDER_TOKEN', prefix: 'Bearer ' } },
        },
      ],
    }),
  );
  consoleHandle = await startConsole(config(file), { logger: clients.logger, clients, env: { PROVIDER_TOKEN: 'secret' } });
  bare = await startConsole(config(undefined), { logger: clients.logger, clients, env: {} });
});

afterAll(async () => {
  await consoleHandle?.close();
  await bare?.close();
  await new Promise((resolve) => api?.close(resolve));
});

async function signIn(url: string): Promise<{ cookie: string; csrf: string }> {
  const answer = await fetch(`${url}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
    body: new URLSearchParams({ operator: 'ada', token: TOKEN, next: '/' }),
  });
  const session = /bridge_console_session=([^;]+)/.exec(answer.headers.get('set-cookie') ?? '')![1]!;
  const cookie = `${SESSION_COOKIE}=${session}`;
  const page = await (await fetch(`${url}/resource?tenant=${TENANT}&type=theme&id=thm_1`, { headers: { cookie } })).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
  return { cookie, csrf };
}

const reconcilePost = (url: string, headers: Record<string, string>, form: Record<string, string>) =>
  fetch(`${url}/resource/reconcile`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams({ tenant: TENANT, type: 'theme', id: 'thm_1', ...form }),
  });

describe('POST /resource/reconcile', () => {
  it('is refused without a session, without the CSRF token or from another origin, before asking the API', async () => {
    const url = consoleHandle.url;
    const { cookie, csrf } = await signIn(url);
    expect((await reconcilePost(url, { origin: url }, { confirm: 'yes' })).status).toBe(401);
    expect((await reconcilePost(url, { origin: url, cookie }, { confirm: 'yes' })).status).toBe(403);
    expect((await reconcilePost(url, { origin: url, cookie }, { confirm: 'yes', csrf: 'forged' })).status).toBe(403);
    expect((await reconcilePost(url, { origin: 'http://evil.example', cookie }, { confirm: 'yes', csrf })).status).toBe(403);
    expect((await reconcilePost(url, { cookie }, { confirm: 'yes', csrf })).status).toBe(403);
    expect(requests).toBe(0);

    // With all three, the preview asks the API and shows what would happen.
    const preview = await reconcilePost(url, { origin: url, cookie }, { csrf });
    const text = await preview.text();
    expect(preview.status, text).toBe(200);
    expect(text).toContain('data-testid="reconcile-outcome">applied');
    expect(text).toContain('would publish');
    expect(requests).toBe(1);
  });

  it('the button is shown only for a tenant and type a source with `reconcile` owns, and the page says why not', async () => {
    const { cookie } = await signIn(consoleHandle.url);
    const shown = await (await fetch(`${consoleHandle.url}/resource?tenant=${TENANT}&type=theme&id=thm_1`, { headers: { cookie } })).text();
    expect(shown).toContain('Preview reconcile');
    const other = await (
      await fetch(`${consoleHandle.url}/resource?tenant=tenant_other&type=theme&id=thm_1`, { headers: { cookie } })
    ).text();
    expect(other).not.toContain('Preview reconcile');
    expect(other).toContain('no source in');
    expect(other).toContain('tenant &quot;tenant_other&quot;');

    const bareSession = await signIn(bare.url);
    const none = await (
      await fetch(`${bare.url}/resource?tenant=${TENANT}&type=theme&id=thm_1`, { headers: { cookie: bareSession.cookie } })
    ).text();
    expect(none).not.toContain('Preview reconcile');
    expect(none).toContain('WEBHOOK_SOURCES_FILE is not set');
    // And the route refuses too (with a valid session and form).
    const answer = await reconcilePost(bare.url, { origin: bare.url, cookie: bareSession.cookie }, { csrf: bareSession.csrf });
    expect(answer.status).toBe(400);
    expect(requests).toBe(1);
  });

  it("a source named in the form must own the tenant: it never pulls for another source's tenant", async () => {
    const url = consoleHandle.url;
    const { cookie, csrf } = await signIn(url);
    const before = requests;
    const answer = await reconcilePost(url, { origin: url, cookie }, { csrf, tenant: SECOND_TENANT, source: 'prov' });
    const text = await answer.text();
    expect(answer.status, text).toBe(400);
    expect(text).toContain('does not own');
    expect(requests).toBe(before);
  });
});
