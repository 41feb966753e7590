import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { keyringFromEnv, loadLiveSnapshot, SourceCatalog, type SecretKeyring } from '#domain/sources/index.ts';
import { recordSecretUses, reportInstance } from '#domain/store/sources.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { topicNames } from '#plumbing/kafka/topics.ts';
import { startConsole, type ConsoleHandle } from '#services/console/console.ts';
import { useTestDatabase } from '../kit/db.ts';
import { consoleTestConfig } from '../kit/console.ts';

// The sources pages in a real browser (Debian's chromium, driven by playwright-core) on real
// Postgres: an operator creates a source with a generated secret, rotates it, sees when each secret
// last verified a request, disables the source, and reads the audit log. A secret's value appears
// on the one page that answers its creation, and in no other page's HTML.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(import.meta.dirname, 'artifacts');
const TOKEN = 'sources-pages-operator-token';
const SOURCE = 'shop-a';
const TENANT = 'tenant_sources_a';
const DAY_MS = 24 * 3600 * 1000;

interface SeenPage {
  url: string;
  status: number;
  html: string;
}

describe('the sources pages in a browser', () => {
  const db = useTestDatabase();
  let keyring: SecretKeyring;
  let consoleHandle: ConsoleHandle;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const seen: Array<Promise<SeenPage | undefined>> = [];
  /** Every secret value the pages handed out (or were given). */
  const values: string[] = [];
  let firstSecret = '';
  let rotatedId = '';

  const url = (p: string) => consoleHandle.url + p;
  const textOf = async (l: Locator) => ((await l.textContent()) ?? '').replace(/\s+/g, ' ').trim();
  const onceValue = async (p: Page) => (await p.locator('[data-testid="generated-secret"] code').textContent())!.trim();

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    keyring = keyringFromEnv({ BRIDGE_SECRET_KEYS: `t1:${randomBytes(32).toString('base64')}` })!;
    const config = consoleTestConfig({
      operatorToken: TOKEN,
      databaseUrl: db.url,
      names: topicNames({ events: 'sources-pages.events', applied: 'sources-pages.applied', retryLevels: 1 }),
      group: 'sources-pages-no-group',
      secretKeyring: keyring,
    });
    consoleHandle = await startConsole(config, {
      logger: createLogger({ name: 'console-sources', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
      env: {},
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    // Every page the browser loads, kept for the check that no secret value leaks into one.
    context.on('response', (response) => {
      if (response.request().resourceType() !== 'document' || (response.status() >= 300 && response.status() < 400)) return;
      seen.push(
        response
          .text()
          .then((html) => ({ url: response.url(), status: response.status(), html }))
          .catch(() => undefined),
      );
    });
    page = await context.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await consoleHandle?.close();
  });

  it('reading needs no sign-in; changing does', async () => {
    await page.goto(url('/sources'));
    expect(await page.locator('[data-testid="sources-empty"]').count()).toBe(1);
    expect(await textOf(page.locator('nav a[aria-current="page"]'))).toBe('Sources');
    await page.goto(url('/sources/new'));
    expect(await textOf(page.locator('[data-testid="cannot-act"]'))).toContain('Sign in');
    expect(await page.locator('[data-testid="create-form"]').count()).toBe(0);
  });

  it('an operator signs in and creates a source with a generated secret, shown once', async () => {
    await page.goto(url('/sign-in?next=/sources/new'));
    await page.getByLabel('your name').fill('ada');
    await page.getByLabel('operator token').fill(TOKEN);
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/sources\/new$/);
    // The form comes prefilled with an example; this source replaces it.
    expect(await page.locator('#spec').inputValue()).toContain('"tenants"');
    await page.locator('#spec').fill(JSON.stringify({ id: SOURCE, tenants: [TENANT], resourceTypes: ['theme'] }, null, 2));
    await page.getByLabel('secret id').fill('k1');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForSelector('[data-testid="created"]');
    expect(await textOf(page.locator('[data-testid="shown-once"]'))).toContain('will not be shown again');
    firstSecret = await onceValue(page);
    values.push(firstSecret);
    expect(firstSecret.length).toBeGreaterThanOrEqual(32);
    await page.screenshot({ path: path.join(ARTIFACTS, 'source-created.png'), fullPage: true });

    // The value shown is the one every ingress verifies with.
    const snapshot = await loadLiveSnapshot(db.pool, keyring);
    expect(snapshot.sources.find((s) => s.id === SOURCE)?.secrets).toEqual([{ id: 'k1', value: firstSecret }]);

    await page.goto(url('/sources'));
    const row = page.locator(`[data-testid="sources"] tr[data-source-id="${SOURCE}"]`);
    expect(await textOf(row.locator('[data-col="enabled"]'))).toBe('enabled');
    expect(await textOf(row.locator('[data-col="secrets"]'))).toBe('1: 1 active');
    expect(await row.textContent()).toContain(TENANT);
    expect(Number(await page.locator('[data-testid="config-version"]').textContent())).toBe(1);
  });

  it('bad input is refused on the form with the field named, and changes nothing', async () => {
    await page.goto(url('/sources/new'));
    await page.locator('#spec').fill(JSON.stringify({ id: 'shop-b', tenant: [TENANT] }));
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForSelector('[data-testid="refusal"]');
    expect(await page.locator('[data-testid="refusal"]').getAttribute('data-status')).toBe('400');
    expect(await textOf(page.locator('[data-testid="problems"]'))).toContain('unknown field(s): tenant');

    // Two sources, one tenant and type, two orderings: refused (422) on the ordering.
    await page.locator('#spec').fill(JSON.stringify({ id: 'shop-b', tenants: [TENANT], ordering: 'occurred_at' }));
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForSelector('[data-testid="refusal"]');
    expect(await page.locator('[data-testid="refusal"]').getAttribute('data-status')).toBe('422');
    expect(await page.locator('[data-testid="problem-path"]').allTextContents()).toContain('sources.shop-b.ordering');

    // A pasted secret too short: the field is named, and the value is not put back on the page.
    const short = 'pasted-short';
    values.push(short);
    await page.locator('#spec').fill(JSON.stringify({ id: 'shop-b', tenants: ['tenant_sources_b'] }));
    await page.locator('input[name="secret_mode"][value="value"]').check();
    await page.getByLabel('secret value').fill(short);
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForSelector('[data-testid="refusal"]');
    expect(await page.locator('[data-testid="refusal"]').getAttribute('data-status')).toBe('422');
    expect(await page.locator('[data-testid="problem-path"]').allTextContents()).toContain('secrets.0.value');
    expect(await page.getByLabel('secret value').inputValue()).toBe('');

    // Not JSON at all: the parser's fault, without the text around it.
    await page.locator('#spec').fill('{"id": "shop-b", oops}');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForSelector('[data-testid="refusal"]');
    expect(await textOf(page.locator('[data-testid="problems"]'))).toContain('not valid JSON');
    expect(await textOf(page.locator('[data-testid="problems"]'))).not.toContain('oops');

    expect((await new SourceCatalog(db.pool, keyring).list()).map((s) => s.id)).toEqual([SOURCE]);
  });

  it('an action without the session, its CSRF token or from another origin is refused', async () => {
    await page.goto(url(`/sources/${SOURCE}`));
    const csrf = await page.locator('input[name="csrf"]').first().inputValue();
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const { revision } = await new SourceCatalog(db.pool, keyring).get(SOURCE);
    const form = { id: SOURCE, revision: String(revision), enabled: 'false' };
    const post = (headers: Record<string, string>, fields: Record<string, string>) =>
      fetch(url('/sources/enabled'), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(fields).toString(),
        redirect: 'manual',
      });
    expect((await post({ origin: consoleHandle.url }, { ...form, csrf })).status).toBe(401);
    expect((await post({ origin: consoleHandle.url, cookie }, form)).status).toBe(403);
    expect((await post({ origin: 'http://evil.example', cookie }, { ...form, csrf })).status).toBe(403);
    expect((await new SourceCatalog(db.pool, keyring).get(SOURCE)).enabled).toBe(true);
  });

  it('rotate: the new value is shown once, the old secret is retiring; last verified shows who the provider signs with', async () => {
    const before = Date.now();
    await page.goto(url(`/sources/${SOURCE}`));
    const after = Date.now();
    expect(await textOf(page.locator('tr[data-secret-id="k1"] [data-col="state"]'))).toBe('active');
    const retire = await page.locator('input[name="retire_others_after"]').inputValue();
    // The default overlap: a day from when the page was made (to the second).
    expect(Date.parse(retire)).toBeGreaterThanOrEqual(before + DAY_MS - 1000);
    expect(Date.parse(retire)).toBeLessThanOrEqual(after + DAY_MS);
    await page.getByRole('button', { name: 'Rotate' }).click();
    await page.waitForSelector('[data-testid="rotated"]');
    const second = await onceValue(page);
    values.push(second);
    expect(second).not.toBe(firstSecret);
    rotatedId = (await page.locator('[data-testid="generated-secret"]').getAttribute('data-secret-id'))!;
    expect(rotatedId).toMatch(new RegExp(`^${SOURCE}-`));

    await page.goto(url(`/sources/${SOURCE}`));
    expect(await textOf(page.locator('tr[data-secret-id="k1"] [data-col="state"]'))).toBe('retiring');
    expect(await textOf(page.locator('tr[data-secret-id="k1"] [data-col="retire-after"]'))).toBe(new Date(retire).toISOString());
    expect(await textOf(page.locator(`tr[data-secret-id="${rotatedId}"] [data-col="state"]`))).toBe('active');
    expect(await textOf(page.locator(`tr[data-secret-id="${rotatedId}"] [data-col="last-verified"]`))).toBe('never');

    // An ingress's flush of the secrets it verified with (no ingress is needed for the page).
    const at = new Date(Date.now() - 5000);
    await recordSecretUses(db.pool, [{ sourceId: SOURCE, secretId: rotatedId, at }]);
    await page.reload();
    expect(await page.locator(`tr[data-secret-id="${rotatedId}"] [data-col="last-verified"] time`).getAttribute('datetime')).toBe(
      at.toISOString(),
    );
    expect(await textOf(page.locator('tr[data-secret-id="k1"] [data-col="last-verified"]'))).toBe('never');
    await page.screenshot({ path: path.join(ARTIFACTS, 'source.png'), fullPage: true });
  });

  it('a form read before another change is refused (412) and changes nothing', async () => {
    const stale = await context.newPage();
    await stale.goto(url(`/sources/${SOURCE}`));
    await page.goto(url(`/sources/${SOURCE}`));
    await page.getByRole('button', { name: 'Disable' }).click();
    await page.waitForSelector('[data-testid="notice"]');
    expect(await textOf(page.locator('[data-testid="source-enabled"]'))).toContain('disabled');

    await stale.getByRole('button', { name: 'Rotate' }).click();
    await stale.waitForSelector('[data-testid="refusal"]');
    expect(await stale.locator('[data-testid="refusal"]').getAttribute('data-status')).toBe('412');
    expect(await textOf(stale.locator('[data-testid="refusal"]'))).toContain('changed meanwhile');
    // The page now shows the source as it is, so the next try carries the current revision.
    expect(await textOf(stale.locator('[data-testid="source-enabled"]'))).toContain('disabled');
    await stale.close();
    expect((await new SourceCatalog(db.pool, keyring).get(SOURCE)).secrets).toHaveLength(2);

    await page.goto(url('/sources'));
    expect(await textOf(page.locator(`tr[data-source-id="${SOURCE}"] [data-col="enabled"]`))).toBe('disabled');
  });

  it('edit: the spec saved with the revision it was read at', async () => {
    // A second tab holds the edit form as read now: after the save below, its revision is stale.
    const stale = await context.newPage();
    await stale.goto(url(`/sources/edit?id=${SOURCE}`));
    await page.goto(url(`/sources/${SOURCE}`));
    await page.getByTestId('edit-link').click();
    const spec = JSON.parse(await page.locator('#spec').inputValue()) as { tenants: string[] };
    spec.tenants.push('tenant_sources_c');
    await page.locator('#spec').fill(JSON.stringify(spec, null, 2));
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForSelector('[data-testid="notice"]');
    expect(await textOf(page.locator('[data-testid="source-spec"]'))).toContain('tenant_sources_c');

    await stale.locator('#spec').fill(JSON.stringify({ ...spec, toleranceSeconds: 60 }, null, 2));
    await stale.getByRole('button', { name: 'Save' }).click();
    await stale.waitForSelector('[data-testid="refusal"]');
    expect(await stale.locator('[data-testid="refusal"]').getAttribute('data-status')).toBe('412');
    // The operator's text is kept, with a link to the source as it is now.
    expect(await stale.locator('#spec').inputValue()).toContain('"toleranceSeconds": 60');
    expect(await stale.locator('[data-testid="reload"] a').getAttribute('href')).toBe(`/sources/edit?id=${SOURCE}`);
    await stale.close();
    expect((await new SourceCatalog(db.pool, keyring).get(SOURCE)).spec.toleranceSeconds).toBe(300);
  });

  it('the list marks an ingress or worker serving an older configuration version as behind', async () => {
    const version = await new SourceCatalog(db.pool, keyring).configVersion();
    await reportInstance(db.pool, { instance: 'ingress-current', role: 'ingress', configVersion: version });
    await reportInstance(db.pool, { instance: 'worker-laggard', role: 'worker', configVersion: version - 1 });
    await page.goto(url('/sources'));
    expect(await page.locator('tr[data-instance="ingress-current"] [data-testid="behind"]').count()).toBe(0);
    expect(await textOf(page.locator('tr[data-instance="worker-laggard"] [data-testid="behind"]'))).toBe('behind');
    await page.screenshot({ path: path.join(ARTIFACTS, 'sources.png'), fullPage: true });
  });

  it('the audit log holds every change, by console:operator, with no secret value', async () => {
    await page.goto(url('/sources/audit'));
    const rows = await page.locator('[data-testid="audit"] tbody tr').evaluateAll((trs) =>
      trs.map((tr) => ({
        action: tr.getAttribute('data-action'),
        actor: tr.querySelector('[data-col="actor"]')!.textContent!.trim(),
        diff: tr.querySelector('[data-col="diff"]')!.textContent!,
      })),
    );
    expect(rows.map((r) => r.action)).toEqual(['update', 'disable', 'rotate', 'create']);
    expect(new Set(rows.map((r) => r.actor))).toEqual(new Set(['console:operator']));
    expect(rows[0]!.diff).toContain('tenant_sources_c');
    expect(rows[2]!.diff).toContain(`secrets.${rotatedId}`);
    await page.screenshot({ path: path.join(ARTIFACTS, 'sources-audit.png'), fullPage: true });
    // The source's own page lists the same changes.
    await page.goto(url(`/sources/${SOURCE}`));
    expect(await page.locator('[data-testid="audit"] tbody tr').count()).toBe(4);
    const stored = await new SourceCatalog(db.pool, keyring).history();
    expect(stored.map((e) => e.actor)).toEqual(['console:operator', 'console:operator', 'console:operator', 'console:operator']);
  });

  it('no page but the one-time answers holds a secret value', async () => {
    const pages = (await Promise.all(seen)).filter((p): p is SeenPage => p !== undefined);
    expect(pages.length).toBeGreaterThan(15);
    const once = pages.filter((p) => p.html.includes('data-testid="shown-once"'));
    expect(once).toHaveLength(2);
    for (const p of pages.filter((q) => !once.includes(q)))
      for (const v of values) expect(p.html.includes(v), `${p.url} (${p.status}) holds a secret value`).toBe(false);
  });
});
