import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { createLogger } from '#plumbing/logging/logger.ts';
import { createClients, startConsole, type ConsoleHandle } from '#services/console/console.ts';
import type { ConsoleConfig } from '#services/console/config.ts';
import { body, freshEventId, freshId, hmacSource, sampleEvent, SECRET_A, startHarness, type Harness } from '../kit/harness.ts';
import { harnessConsoleConfig } from '../kit/console.ts';

// The console's doors, in a real browser against a real ingress, worker, broker and Postgres: what a
// page on another site, a guessing client or a crafted link can get out of it.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(import.meta.dirname, 'artifacts');
const TOKEN = 'doors-test-operator-token';
const TENANT = 'tenant_doors';
const SECRETS = { api_key: 'sk_live_DOORS_API_KEY_1', token: 'DOORS_ASSET_TOKEN_2', password: 'DOORS_PASSWORD_3' };

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One HTTP request by hand: any Host, any local address (a second client on loopback). */
function request(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; localAddress?: string } = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: options.method ?? 'GET',
        headers: options.headers,
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

function signInForm(url: string, token: string, next: string, origin = url, localAddress?: string): Promise<RawAnswer> {
  return request(`${url}/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin },
    body: new URLSearchParams({ operator: 'ada', token, next }).toString(),
    ...(localAddress ? { localAddress } : {}),
  });
}

describe('the console refuses what another site or a guesser asks', () => {
  let harness: Harness;
  let browser: Browser;
  let open: ConsoleHandle;
  let closed: ConsoleHandle;
  let https: ConsoleHandle;
  // Sign-in to read, on clients whose every use is counted: a refused request must run no query.
  let gated: ConsoleHandle;
  let gatedClients: ReturnType<typeof createClients>;
  let gatedReads = 0;
  // Bound to an IPv4-mapped address: clients are seen as ::ffff:127.0.0.x, as on a dual-stack socket.
  let mapped: ConsoleHandle;
  const resourceId = freshId('thm');
  const resourcePath = `/resource?tenant=${TENANT}&type=theme&id=${resourceId}`;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    harness = await startHarness({ sources: [hmacSource('src-doors', SECRET_A, [TENANT])] });
    // Two snapshots carrying credentials of the provider's own (data is the provider's model).
    for (const v of [1, 2]) {
      const event = sampleEvent(TENANT, resourceId, v, {
        event_id: freshEventId(),
        data: {
          name: `Doors v${v}`,
          cdn: { api_key: SECRETS.api_key, region: 'eu-doors' },
          delivery: { token: SECRETS.token },
          password: SECRETS.password,
        } as never,
      });
      expect((await harness.post('src-doors', body(event))).status).toBe(202);
    }
    await harness.settle();

    const base = harnessConsoleConfig(harness, { operatorToken: TOKEN, allowedHosts: ['console.doors.test'] });
    const logger = createLogger({ name: 'console-doors', level: process.env.TEST_LOG_LEVEL ?? 'silent' });
    open = await startConsole(base, { logger, env: {} });
    closed = await startConsole({ ...base, signInToRead: true }, { logger, env: {} });
    https = await startConsole({ ...base, https: true }, { logger, env: {} });
    const gatedConfig: ConsoleConfig = { ...base, signInToRead: true };
    gatedClients = createClients(gatedConfig, logger);
    // Every checkout from the pool (pool.query too) and every admin client is a read.
    gatedClients.pool.on('acquire', () => (gatedReads += 1));
    const countedAdmin = gatedClients.withAdmin;
    gatedClients.withAdmin = (fn) => {
      gatedReads += 1;
      return countedAdmin(fn);
    };
    gated = await startConsole(gatedConfig, { logger, env: {}, clients: gatedClients });
    mapped = await startConsole({ ...base, host: '::ffff:127.0.0.1' }, { logger, env: {} });
    // evil.example stands for a rebinding domain: a name of the attacker's that resolves to the console.
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--host-resolver-rules=MAP evil.example 127.0.0.1, MAP console.doors.test 127.0.0.1'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await open?.close();
    await closed?.close();
    await https?.close();
    await gated?.close();
    await gatedClients?.close();
    await mapped?.close();
    await harness?.close();
  });

  it('DNS rebinding: a request naming another host gets 421 and no data; the configured names answer', async () => {
    const page = await browser.newPage();
    const evil = await page.goto(`http://evil.example:${open.port}${resourcePath}`);
    expect(evil!.status()).toBe(421);
    expect(await page.content()).not.toContain(resourceId);
    await page.screenshot({ path: path.join(ARTIFACTS, 'doors-rebinding.png') });
    for (const name of ['localhost', '127.0.0.1', 'console.doors.test']) {
      const answer = await page.goto(`http://${name}:${open.port}${resourcePath}`);
      expect(answer!.status(), name).toBe(200);
      expect(await page.locator('[data-testid="state-version"] strong').textContent()).toBe('2');
    }
    await page.close();
    // HTTP/1.0 without a Host header at all.
    const noHost = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(open.port, '127.0.0.1', () => socket.end(`GET ${resourcePath} HTTP/1.0\r\n\r\n`));
      let text = '';
      socket.on('data', (c: Buffer) => (text += c.toString('utf8')));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(noHost).toMatch(/^HTTP\/1\.[01] 400/);
    expect(noHost).not.toContain(resourceId);
  });

  it('sign-in to read: the page asks for a sign-in, then shows what was asked', async () => {
    const page = await browser.newPage();
    await page.goto(`${closed.url}${resourcePath}`);
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    expect(await page.content()).not.toContain('Doors v2');
    await page.getByLabel('your name').fill('ada');
    await page.getByLabel('operator token').fill(TOKEN);
    await page.keyboard.press('Enter');
    await page.waitForURL((u) => u.pathname === '/resource');
    expect(new URL(page.url()).search).toBe(new URL(`http://x${resourcePath}`).search);
    expect(await page.locator('[data-testid="state-version"] strong').textContent()).toBe('2');
    await page.close();
    // Every page, not only the resource page.
    for (const p of ['/', '/dlq', '/search?q=x', '/dlq/record?ref=0:0']) {
      const answer = await request(`${closed.url}${p}`);
      expect(answer.status, p).toBe(303);
      expect(answer.headers.location, p).toMatch(/^\/sign-in\?next=/);
    }
  });

  it('redaction: secret-named keys of snapshots and applied records never reach the resource page', async () => {
    const page = await browser.newPage();
    await page.goto(`${open.url}${resourcePath}`);
    // Open every applied record's value, then look at the whole page as a user would.
    for (const d of await page.locator('[data-testid="applied"] details').all()) await d.locator('summary').click();
    const shown = await page.content();
    for (const secret of Object.values(SECRETS)) expect(shown).not.toContain(secret);
    expect(shown).toContain('[redacted]');
    expect(shown).toContain('eu-doors');
    await page.screenshot({ path: path.join(ARTIFACTS, 'doors-redacted.png'), fullPage: true });
    await page.close();
  });

  it('after sign-in, `next` leads only to a path on this console', async () => {
    const offSite = [
      '//evil.example/x',
      '//evil/x',
      '/\\evil.example/x',
      '\\\\evil.example',
      'https://evil.example/',
      'http:evil.example',
      '/\t/evil.example',
      '/.//evil.example',
      '%2F%2Fevil.example',
    ];
    for (const next of offSite) {
      const answer = await signInForm(open.url, TOKEN, next);
      expect(answer.status, next).toBe(303);
      expect(new URL(answer.headers.location!, open.url).origin, next).toBe(open.url);
      expect(answer.headers.location!.startsWith('//'), next).toBe(false);
    }
    // A path on this console, query included, is kept.
    expect((await signInForm(open.url, TOKEN, '/dlq?tenant=t1')).headers.location).toBe('/dlq?tenant=t1');
    // The same in the browser: after signing in from a crafted link, it stays on the console.
    const page = await browser.newPage();
    await page.goto(`${open.url}/sign-in?next=${encodeURIComponent('//evil/x')}`);
    await page.getByLabel('your name').fill('ada');
    await page.getByLabel('operator token').fill(TOKEN);
    await page.keyboard.press('Enter');
    await page.waitForLoadState();
    expect(new URL(page.url()).origin).toBe(open.url);
    await page.close();
  });

  it('throttles failed sign-ins per client address: 429 with Retry-After, other addresses unaffected', async () => {
    for (let i = 0; i < 5; i += 1) expect((await signInForm(open.url, 'wrong-token-guess-000', '/')).status).toBe(401);
    const throttled = await signInForm(open.url, 'wrong-token-guess-000', '/');
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    // Even the right token waits: a guesser cannot tell a hit from the throttle.
    expect((await signInForm(open.url, TOKEN, '/')).status).toBe(429);
    // Another client (another loopback address) signs in.
    expect((await signInForm(open.url, TOKEN, '/', open.url, '127.0.0.2')).status).toBe(303);
  });

  it('the session cookie is Secure when the console is served over HTTPS, and not otherwise', async () => {
    const secure = await signInForm(https.url, TOKEN, '/', https.url.replace('http:', 'https:'));
    expect(secure.status).toBe(303);
    expect(String(secure.headers['set-cookie'])).toMatch(/;\s*Secure/i);
    // Behind HTTPS the browser's Origin is https://: a plain-http one is another origin.
    expect((await signInForm(https.url, TOKEN, '/', https.url)).status).toBe(403);
    const plain = await signInForm(closed.url, TOKEN, '/');
    expect(plain.status).toBe(303);
    expect(String(plain.headers['set-cookie'])).not.toMatch(/Secure/i);
  });
  it('sign-in to read gates every method: an anonymous HEAD, OPTIONS or other method learns nothing and runs no query', async () => {
    // An id of the same length that names no resource: a leak would show as another status or length.
    const missingPath = `/resource?tenant=${TENANT}&type=theme&id=${'z'.repeat(resourceId.length)}`;
    const paths = [resourcePath, missingPath, '/', '/dlq', '/dlq/record?ref=0:0', `/search?q=${resourceId}`, '/reconcile', '/no-such-page'];
    const readsBefore = gatedReads;
    const lengths = new Map<string, string | undefined>();
    for (const p of paths) {
      const get = await request(`${gated.url}${p}`);
      expect(get.status, `GET ${p}`).toBe(303);
      for (const method of ['HEAD', 'OPTIONS', 'PUT', 'PATCH', 'DELETE', 'POST']) {
        const answer = await request(`${gated.url}${p}`, { method });
        expect(answer.status, `${method} ${p}`).toBe(get.status);
        expect(answer.headers.location, `${method} ${p}`).toMatch(/^\/sign-in(\?|$)/);
        expect(answer.text, `${method} ${p}`).not.toContain('Doors v');
        expect(answer.headers.allow, `${method} ${p}`).toBeUndefined();
        if (method === 'HEAD') lengths.set(p, answer.headers['content-length']);
      }
    }
    expect(lengths.get(resourcePath)).toBe(lengths.get(missingPath));
    expect(gatedReads - readsBefore, 'queries run for anonymous requests').toBe(0);
    // Sign-in and the assets stay reachable for every method a browser uses on them.
    expect((await request(`${gated.url}/sign-in`, { method: 'HEAD' })).status).toBe(200);
    expect((await request(`${gated.url}/assets/console.css`, { method: 'HEAD' })).status).toBe(200);
    // Signed in, HEAD answers as GET does (and the counter sees the reads it makes).
    const signIn = await signInForm(gated.url, TOKEN, '/');
    expect(signIn.status).toBe(303);
    const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
    const head = await request(`${gated.url}${resourcePath}`, { method: 'HEAD', headers: { cookie } });
    expect(head.status).toBe(200);
    expect(gatedReads).toBeGreaterThan(readsBefore);
    // An action without a session is still refused by the guard's own checks.
    const replay = await request(`${gated.url}/dlq/replay`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gated.url, cookie },
      body: 'ref=0:0&csrf=forged',
    });
    expect(replay.status).toBe(403);
  });

  it('sign-in to read gates HEAD and OPTIONS from a page in the browser too', async () => {
    const page = await browser.newPage();
    await page.goto(`${gated.url}/sign-in`);
    const readsBefore = gatedReads;
    const answers = await page.evaluate(
      async (paths: string[]) => {
        const out = [];
        for (const p of paths)
          for (const method of ['HEAD', 'OPTIONS']) {
            const r = await fetch(p, { method });
            out.push({ p, method, status: r.status, url: r.url, redirected: r.redirected, text: await r.text() });
          }
        return out;
      },
      [resourcePath, '/dlq/record?ref=0:0', `/search?q=${resourceId}`, '/'],
    );
    for (const a of answers) {
      const what = `${a.method} ${a.p}`;
      expect(a.redirected, what).toBe(true);
      expect(new URL(a.url).pathname, what).toBe('/sign-in');
      expect(a.text, what).not.toContain('Doors v');
    }
    expect(gatedReads - readsBefore, 'queries run for anonymous requests').toBe(0);
    await page.close();
  });

  it('the throttle keys an IPv4-mapped client by its IPv4 address', async () => {
    // Each loopback address is its own client, though the socket reports ::ffff:127.0.0.x (all in one /64).
    const url = `http://127.0.0.1:${mapped.port}`;
    for (let i = 0; i < 5; i += 1) expect((await signInForm(url, 'wrong-token-guess-111', '/', url, '127.0.0.3')).status).toBe(401);
    expect((await signInForm(url, TOKEN, '/', url, '127.0.0.3')).status).toBe(429);
    expect((await signInForm(url, TOKEN, '/', url, '127.0.0.4')).status).toBe(303);
  });
});
