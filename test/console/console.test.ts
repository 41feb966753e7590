import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { loadReconcileSources } from '#domain/sources/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { startConsole, type ConsoleHandle } from '#services/console/console.ts';
import { body, freshEventId, freshId, hmacSource, sampleEvent, SECRET_A, SECRET_B, startHarness, type Harness } from '../kit/harness.ts';
import { startProviderApi, type ProviderApi } from '../kit/provider-api.ts';
import { eventually } from '../kit/eventually.ts';
import { harnessConsoleConfig } from '../kit/console.ts';

// The console in a real browser (Debian's chromium, driven by playwright-core) against a running
// ingress and worker on the real broker and Postgres, with real signed traffic.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(import.meta.dirname, 'artifacts');
const TOKEN = 'console-test-operator-token';
const TENANT = 'tenant_console';
// Owned by a source with `reconcile` (TENANT is not: its resources are never pulled).
const TENANT_R = 'tenant_console_rec';
const PROVIDER_TOKEN = 'console-test-provider-token';
// Published by a source that orders themes by occurred_at (seed 002's fallback).
const TENANT_T = 'tenant_console_time';

describe('the console in a browser', () => {
  let harness: Harness;
  let consoleHandle: ConsoleHandle;
  let browser: Browser;
  let page: Page;
  let api: ProviderApi;
  const providerEnv = { PROVIDER_TOKEN };
  const resourceId = freshId('thm');
  const doomedId = freshId('thm');
  const doomedEvent = sampleEvent(TENANT, doomedId, 1, { event_id: freshEventId() });

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    // The provider's API (a real HTTP server) and the sources file the console and the worker read.
    api = await startProviderApi();
    const sourcesFile = path.join(mkdtempSync(path.join(tmpdir(), 'console-sources-')), 'sources.json');
    writeFileSync(
      sourcesFile,
      JSON.stringify({
        sources: [
          {
            id: 'src-console',
            secrets: [{ id: 'k1', env: 'UNUSED_SIGNING_SECRET' }],
            tenants: [TENANT_R],
            reconcile: { url: `${api.url}/api/{tenant}/{type}s/{id}`, auth: { env: 'PROVIDER_TOKEN', prefix: 'Bearer ' } },
          },
        ],
      }),
    );
    harness = await startHarness({
      sources: [
        hmacSource('src-console', SECRET_A, [TENANT, TENANT_R]),
        { ...hmacSource('src-time', SECRET_B, [TENANT_T]), occurredAtTypes: ['theme'] },
      ],
      worker: { reconcile: { concurrency: 1, queueLimit: 100, sources: loadReconcileSources(sourcesFile, providerEnv) } },
      // The first attempt at this resource fails for good: it is dead-lettered; a replay applies it.
      faults: [`permanent:${TENANT}/theme/${doomedId}:1`],
    });
    const events = [1, 2, 3].map((v) =>
      sampleEvent(TENANT, resourceId, v, {
        event_id: freshEventId(),
        data: { name: `Theme v${v}`, palette: { primary: `#00000${v}` } } as never,
      }),
    );
    for (const e of events) expect((await harness.post('src-console', body(e))).status).toBe(202);
    // A redelivery of the newest (duplicate) and an older version under a new id (stale).
    expect((await harness.post('src-console', body(events[2]))).status).toBe(202);
    expect((await harness.post('src-console', body({ ...events[0]!, event_id: freshEventId() }))).status).toBe(202);
    expect((await harness.post('src-console', body(doomedEvent))).status).toBe(202);
    await harness.settle();
    await eventually(async () => (await harness.inbox(TENANT, doomedEvent.event_id))?.status === 'dead_lettered', {
      timeoutMs: 60_000,
      message: 'dead-lettered',
    });

    const config = harnessConsoleConfig(harness, { operatorToken: TOKEN, sourcesFile });
    consoleHandle = await startConsole(config, {
      logger: createLogger({ name: 'console-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
      env: providerEnv,
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await consoleHandle?.close();
    await harness?.close();
    await api?.close();
  });

  it('overview: the counts by outcome are the inbox counts', async () => {
    await page.goto(consoleHandle.url + '/');
    const { rows } = await harness.db.pool.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM inbox_events GROUP BY status',
    );
    const inbox = new Map(rows.map((r) => [r.status, r.n]));
    const cell = async (outcome: string) => Number(await page.locator(`[data-outcome="${outcome}"]`).textContent());
    expect(await cell('applied')).toBe(inbox.get('applied') ?? 0);
    expect(await cell('duplicate')).toBe((inbox.get('duplicate') ?? 0) + (inbox.get('duplicate_version') ?? 0));
    expect(await cell('stale')).toBe(inbox.get('stale') ?? 0);
    expect(await cell('dead-lettered')).toBe(inbox.get('dead_lettered') ?? 0);
    // A quarantined delivery has an anomaly row, not an inbox row of its own.
    const { rows: anomalies } = await harness.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM inbox_anomalies');
    expect(await cell('quarantined')).toBe(anomalies[0]!.n);
    expect(await cell('applied')).toBe(3);
    expect(await cell('dead-lettered')).toBe(1);
    // The charts are drawn by uPlot, served by the console itself.
    await expect.poll(() => page.locator('[data-chart] canvas').count()).toBe(6);
    // The ingress answered 202 six times (its own metrics, from its admin port).
    expect(Number(await page.locator('[data-status="202"]').textContent())).toBe(6);
    expect(Number(await page.locator('[data-testid="total-lag"]').textContent())).toBe(0);
    await page.screenshot({ path: path.join(ARTIFACTS, 'overview.png'), fullPage: true });
  });

  it("resource: the timeline is the resource's inbox rows; a diff between two snapshots", async () => {
    await page.goto(`${consoleHandle.url}/resource?tenant=${TENANT}&type=theme&id=${resourceId}`);
    const { rows } = await harness.db.pool.query<{ event_id: string; status: string; attempts: number }>(
      `SELECT event_id, status, attempts FROM inbox_events WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`,
      [TENANT, resourceId],
    );
    const shown = await page.locator('[data-testid="timeline"] tbody tr').evaluateAll((trs) =>
      trs.map((tr) => ({
        event_id: tr.getAttribute('data-event-id'),
        status: tr.querySelector('[data-col="status"]')!.textContent!.trim(),
        attempts: Number(tr.querySelector('[data-col="attempts"]')!.textContent),
      })),
    );
    const byId = (a: { event_id: string | null }, b: { event_id: string | null }) => String(a.event_id).localeCompare(String(b.event_id));
    expect(shown.sort(byId)).toEqual(rows.sort(byId));
    expect(await page.locator('[data-testid="state-version"] strong').textContent()).toBe('3');
    // Default diff: the two newest applied snapshots (v2 -> v3).
    await expect.poll(() => page.locator('[data-testid="diff"]').textContent()).toContain('palette.primary');
    expect(await page.locator('[data-testid="applied"] tbody tr').count()).toBe(3);
    await page.screenshot({ path: path.join(ARTIFACTS, 'resource.png'), fullPage: true });
  });

  it('search finds an event by id', async () => {
    await page.goto(`${consoleHandle.url}/search?q=${doomedEvent.event_id}`);
    expect(await page.locator('[data-testid="search-results"] tbody tr').count()).toBe(1);
    await page.screenshot({ path: path.join(ARTIFACTS, 'search.png'), fullPage: true });
  });

  it('refuses a replay without the CSRF token or from another origin', async () => {
    const answer = await fetch(`${consoleHandle.url}/dlq/replay`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://evil.example' },
      body: 'scope=filter&confirm=yes',
    });
    expect(answer.status).toBe(403);
    expect((await harness.inbox(TENANT, doomedEvent.event_id))?.status).toBe('dead_lettered');
  });

  it('dead letters: an operator replays one after a dry-run preview, and the DLQ view changes', async () => {
    await page.goto(`${consoleHandle.url}/dlq?tenant=${TENANT}`);
    const row = page.locator(`[data-testid="dlq-table"] tr[data-event-id="${doomedEvent.event_id}"]`);
    expect(await row.locator('[data-col="inbox"]').textContent()).toBe('dead_lettered');
    expect(await row.locator('input[type="checkbox"]').isDisabled()).toBe(true);

    // Opening one shows its headers and error; the signature never reaches the page.
    await row.locator('a').click();
    expect(await page.locator('[data-testid="error"]').textContent()).toContain('injected');
    await page.screenshot({ path: path.join(ARTIFACTS, 'dlq-record.png'), fullPage: true });

    // Sign in with the keyboard.
    await page.goto(`${consoleHandle.url}/sign-in?next=/dlq`);
    await page.getByLabel('your name').fill('ada');
    await page.getByLabel('operator token').fill(TOKEN);
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/dlq$/);
    expect(await page.locator('[data-testid="operator"]').textContent()).toBe('ada');

    await page.goto(`${consoleHandle.url}/dlq?tenant=${TENANT}`);
    await row.locator('input[type="checkbox"]').check();
    await page.getByRole('button', { name: 'Preview replay of the selected' }).click();
    expect(await page.locator('[data-testid="preview-summary"]').textContent()).toContain('Dry run');
    expect(await page.locator('[data-testid="plan"] tbody tr').count()).toBe(1);
    expect((await harness.inbox(TENANT, doomedEvent.event_id))?.status).toBe('dead_lettered');
    await page.screenshot({ path: path.join(ARTIFACTS, 'dlq-preview.png'), fullPage: true });

    await page.getByRole('button', { name: /Replay 1 record/ }).click();
    expect(await page.locator('[data-testid="outcomes"] [data-col="outcome"]').textContent()).toBe('applied');
    expect((await harness.inbox(TENANT, doomedEvent.event_id))?.status).toBe('applied');
    await page.screenshot({ path: path.join(ARTIFACTS, 'dlq-replayed.png'), fullPage: true });

    await page.goto(`${consoleHandle.url}/dlq?tenant=${TENANT}`);
    expect(await row.locator('[data-col="inbox"]').textContent()).toBe('applied');
    await page.screenshot({ path: path.join(ARTIFACTS, 'dlq.png'), fullPage: true });
  });

  it('resource: an operator reconciles from the page after a dry-run preview; the state reaches the provider version', async () => {
    // No source with `reconcile` owns TENANT: no button, and the page says why.
    await page.goto(`${consoleHandle.url}/resource?tenant=${TENANT}&type=theme&id=${resourceId}`);
    expect(await page.getByRole('button', { name: 'Preview reconcile' }).count()).toBe(0);
    expect(await page.locator('[data-testid="reconcile-unavailable"]').textContent()).toContain(`tenant "${TENANT}"`);

    const id = freshId('thm');
    const first = sampleEvent(TENANT_R, id, 1, { event_id: freshEventId(), event_type: 'theme.created' } as never);
    expect((await harness.post('src-console', body(first))).status).toBe(202);
    await eventually(async () => (await harness.state(TENANT_R, id))?.version === 1, { timeoutMs: 30_000, message: 'v1 applied' });
    await harness.settle();
    const pulled = { ...first.data, name: 'pulled from the provider v4' };
    api.replies.set(`/api/${TENANT_R}/themes/${id}`, { status: 200, body: { version: 4, data: pulled } });

    const inboxOf = async () =>
      (
        await harness.db.pool.query<{ event_id: string; status: string; source: string; reconcile_trigger: string | null }>(
          `SELECT event_id, status, source, reconcile_trigger FROM inbox_events WHERE tenant_id = $1 AND resource_id = $2 ORDER BY event_id`,
          [TENANT_R, id],
        )
      ).rows;
    const inboxBefore = await inboxOf();
    const stateBefore = await harness.state(TENANT_R, id);
    const eventsBefore = await harness.eventsCount();

    // Signed in already (the DLQ test): the button is there.
    await page.goto(`${consoleHandle.url}/resource?tenant=${TENANT_R}&type=theme&id=${id}`);
    expect(await page.locator('[data-testid="operator"]').textContent()).toBe('ada');
    await page.getByRole('button', { name: 'Preview reconcile' }).click();
    expect(await page.locator('[data-testid="reconcile-summary"]').textContent()).toContain('Dry run');
    expect(await page.locator('[data-testid="reconcile-outcome"]').textContent()).toBe('applied');
    expect(await page.locator('[data-testid="reconcile-fetched"]').textContent()).toContain('200, version 4');
    expect(await page.locator('[data-testid="reconcile-event"]').textContent()).toContain('would publish');
    expect(await page.locator('[data-testid="reconcile-data"]').textContent()).toContain('pulled from the provider v4');
    await page.screenshot({ path: path.join(ARTIFACTS, 'reconcile-preview.png'), fullPage: true });
    // The preview asked the API (with the source's credentials) and changed nothing.
    expect(api.requests.filter((r) => r.path.includes(id)).map((r) => r.authorization)).toEqual([`Bearer ${PROVIDER_TOKEN}`]);
    expect(await harness.eventsCount()).toBe(eventsBefore);
    expect(await inboxOf()).toEqual(inboxBefore);
    expect(await harness.state(TENANT_R, id)).toEqual(stateBefore);

    await page.getByRole('button', { name: 'Reconcile now' }).click();
    expect(await page.locator('[data-testid="reconcile-outcome"]').textContent()).toBe('applied');
    expect(await page.locator('[data-testid="reconcile-settled"]').textContent()).toBe('applied');
    expect(await harness.state(TENANT_R, id)).toMatchObject({ version: 4, data: { name: 'pulled from the provider v4' } });
    const pulledRows = (await inboxOf()).filter((r) => r.source === 'reconcile');
    expect(pulledRows).toMatchObject([{ status: 'applied', reconcile_trigger: 'operator' }]);

    // The outcome page names the event, from `reconcile` with trigger `operator` (as the CLI's).
    const eventText = await page.locator('[data-testid="reconcile-event"]').innerText();
    expect(eventText).toContain(`published ${pulledRows[0]!.event_id}`);
    expect(eventText).toContain('from reconcile, trigger operator');
    await page.screenshot({ path: path.join(ARTIFACTS, 'reconcile-result.png'), fullPage: true });

    // The timeline shows that event applied, and the state at v4.
    await page.getByRole('link', { name: 'Back to the resource' }).click();
    expect(await page.locator('[data-testid="state-version"] strong').textContent()).toBe('4');
    const row = page.locator(`[data-testid="timeline"] tr[data-event-id="${pulledRows[0]!.event_id}"]`);
    expect(await row.locator('[data-col="status"]').textContent()).toBe('applied');
    expect(await row.locator('[data-col="from"]').textContent()).toBe('reconcile (operator)');
    await page.screenshot({ path: path.join(ARTIFACTS, 'reconcile-done.png'), fullPage: true });
  });

  it("resource: a type ordered by occurred_at shows the time that ordered the state, and each event's time", async () => {
    const id = freshId('thm');
    const at = (second: number) => `2026-06-16T10:15:${String(second).padStart(2, '0')}.000250Z`;
    const timed = (second: number) => {
      const event = sampleEvent(TENANT_T, id, 0, { event_id: freshEventId(), occurred_at: at(second) }) as {
        resource: { version?: number };
      };
      delete event.resource.version;
      return event;
    };
    const [first, newest, late] = [timed(10), timed(20), timed(15)];
    for (const e of [first, newest, late]) expect((await harness.post('src-time', body(e))).status).toBe(202);
    await harness.settle();
    await page.goto(`${consoleHandle.url}/resource?tenant=${TENANT_T}&type=theme&id=${id}`);
    const state = await page.locator('[data-testid="state-version"]').textContent();
    expect(state).toMatch(/ordered by\s+occurred_at:\s+2026-06-16T10:15:20\.000250Z/);
    expect(state).toMatch(/version\s+none/);
    const rows = await page
      .locator('[data-testid="timeline"] tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) => [
          tr.querySelector('[data-col="occurred"]')!.textContent!.trim(),
          tr.querySelector('[data-col="status"]')!.textContent!.trim(),
        ]),
      );
    expect(rows.sort()).toEqual([
      ['2026-06-16T10:15:10.000Z', 'applied'],
      ['2026-06-16T10:15:15.000Z', 'stale'],
      ['2026-06-16T10:15:20.000Z', 'applied'],
    ]);
  });

  it('keeps short values whole in a 1400 px window (statuses and sources once broke mid-word)', async () => {
    const wide = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await wide.goto(`${consoleHandle.url}/resource?tenant=${TENANT}&type=theme&id=${resourceId}`);
    // The lines a cell's text takes: the distinct tops of its text boxes.
    const cells = await wide.locator('[data-testid="timeline"] tbody tr').evaluateAll((trs) =>
      trs.flatMap((tr) =>
        ['type', 'version', 'status', 'from'].map((col) => {
          const td = tr.querySelector(`[data-col="${col}"]`)!;
          const range = (globalThis as any).document.createRange();
          range.selectNodeContents(td);
          const tops = new Set([...range.getClientRects()].map((r: { top: number }) => Math.round(r.top)));
          return { col, text: td.textContent!.trim(), lines: tops.size };
        }),
      ),
    );
    expect(cells.length).toBeGreaterThanOrEqual(4 * 3);
    expect(cells.filter((c) => c.lines !== 1)).toEqual([]);
    await wide.screenshot({ path: path.join(ARTIFACTS, 'resource-1400.png'), fullPage: true });
    await wide.close();
  });

  it('is readable in a narrow window', async () => {
    const narrow = await browser.newPage({ viewport: { width: 380, height: 800 } });
    await narrow.goto(consoleHandle.url + '/');
    const overflow = await narrow.evaluate(() => {
      const root = (globalThis as any).document.documentElement;
      return root.scrollWidth - root.clientWidth;
    });
    expect(overflow).toBeLessThanOrEqual(0);
    await narrow.screenshot({ path: path.join(ARTIFACTS, 'overview-narrow.png'), fullPage: true });
    await narrow.close();
  });
});
