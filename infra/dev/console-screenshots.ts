// Screenshots of the console's pages for the docs (docs/screenshots/), taken from a running bridge
// (`npm start` in another terminal) after sending it a small story: a theme updated three times,
// a provider redelivery, a late (stale) delivery and a reused event id with other content, which
// the worker quarantines and dead-letters.
// Usage: npm run docs:screenshots
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { sampleThemeEvent, sampleThemeSnapshot } from '#domain/contract/sample.ts';
import { signWebhook } from '#domain/signing/sign-webhook.ts';
import { loadDevEnv } from './bootstrap.ts';
import { repoRoot } from '../paths.ts';

loadDevEnv();
const ingress = process.env.INGRESS_URL ?? 'http://127.0.0.1:8080';
const consoleUrl = process.env.CONSOLE_URL ?? 'http://127.0.0.1:9470';
const secret = process.env.DEMO_SECRET!;
const out = path.join(repoRoot, 'docs', 'screenshots');

async function send(body: string, id: string): Promise<number> {
  const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id });
  const response = await fetch(`${ingress}/webhooks/demo`, { method: 'POST', headers, body });
  await response.text();
  return response.status;
}

const themeId = `thm_aurora-${Date.now().toString(36)}`;
const base = Date.now();
const versions = [1, 2, 3].map((n) =>
  sampleThemeEvent({
    resource: { type: 'theme', id: themeId, version: base + n },
    data: {
      ...sampleThemeSnapshot(),
      slug: 'aurora',
      name: `Aurora v${n}`,
      palette: { background: '#101820', foreground: '#F2AA4C', accent: n === 3 ? '#00A3E0' : '#7C5CFF' },
    },
  }),
);
const bodies = versions.map((e) => JSON.stringify(e));
const statuses: number[] = [];
for (const [i, body] of bodies.entries()) statuses.push(await send(body, versions[i]!.event_id));
statuses.push(await send(bodies[2]!, versions[2]!.event_id)); // the provider redelivers v3
const late = sampleThemeEvent({ resource: { type: 'theme', id: themeId, version: base } });
statuses.push(await send(JSON.stringify(late), late.event_id)); // older than what is stored
const reused = { ...versions[1]!, data: { ...sampleThemeSnapshot(), name: 'Aurora (other content)' } };
statuses.push(await send(JSON.stringify(reused), reused.event_id)); // same id, other bytes
console.log(`sent ${statuses.length} webhooks: ${statuses.join(' ')}`);
await new Promise((r) => setTimeout(r, 4000));

mkdirSync(out, { recursive: true });
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const pages: Array<[string, string]> = [
  ['overview', '/'],
  ['resource', `/resource?tenant=tenant_acme&type=theme&id=${themeId}`],
  ['dead-letters', '/dlq'],
  ['search', `/search?q=${versions[1]!.event_id}`],
  ['sources', '/sources'],
];
for (const [name, url] of pages) {
  await page.goto(`${consoleUrl}${url}`, { waitUntil: 'networkidle' });
  await page.screenshot({ path: path.join(out, `${name}.png`), fullPage: true });
  console.log(`docs/screenshots/${name}.png  (${url})`);
}
await browser.close();
