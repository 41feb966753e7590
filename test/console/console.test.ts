import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createLogger } from '#plumbing/logging/logger.ts';
import { startConsole, type ConsoleHandle } from '#services/console/console.ts';
import type { ConsoleConfig } from '#services/console/config.ts';
import {
  body,
  freshEventId,
  freshId,
  hmacSource,
  sampleEvent,
  SECRET_A,
  startHarness,
  waitFor,
  type Harness,
} from '../contract/harness.ts';
import { testBrokers } from '../helpers/kafka.ts';

// The console in a real browser (Debian's chromium, driven by playwright-core) against a running
// ingress and worker on the real broker and Postgres, with real signed traffic.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(import.meta.dirname, 'artifacts');
const TOKEN = 'console-test-operator-token';
const TENANT = 'tenant_console';

describe('the console in a browser', () => {
  let harness: Harness;
  let consoleHandle: ConsoleHandle;
  let browser: Browser;
  let page: Page;
  const resourceId = freshId('thm');
  const doomedId = freshId('thm');
  const doomedEvent = sampleEvent(TENANT, doomedId, 1, { event_id: freshEventId() });

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    harness = await startHarness({
      sources: [hmacSource('src-console', SECRET_A, [TENANT])],
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
    await waitFor('dead-lettered', async () => (await harness.inbox(TENANT, doomedEvent.event_id))?.status === 'dead_lettered', 60_000);

    const config: ConsoleConfig = {
      port: 0,
      host: '127.0.0.1',
      operatorToken: TOKEN,
      brokers: testBrokers(),
      databaseUrl: harness.db.url,
      statementTimeoutMs: 10_000,
      names: harness.names,
      group: harness.groupId,
      ingressMetricsUrl: `${harness.ingress.adminUrl}/metrics`,
      logLevel: 'silent',
    };
    consoleHandle = await startConsole(config, {
      logger: createLogger({ name: 'console-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await consoleHandle?.close();
    await harness?.close();
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
