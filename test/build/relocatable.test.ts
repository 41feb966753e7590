import { spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDist } from '../../infra/build/dist.ts';
import { repoRoot } from '../kit/infra.ts';
import { useTestDatabase } from '../kit/db.ts';
import { createTestTopics, testBrokers, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { HMAC_SECRET, post, signedRequest } from '../kit/ingress.ts';
import { eventually } from '../kit/eventually.ts';

// `npm run build` makes a dist/ that runs wherever it is copied: built, moved to a directory that
// has nothing to do with the repository, and started from there (the CLI migrates an empty
// database; the ingress, the worker and the console run against the real broker and Postgres).
describe('the release build runs where it is moved (infra/build/dist.ts)', () => {
  const temporary: string[] = [];
  const running: ServiceProcess[] = [];
  let dist: string;
  let sourcesFile: string;
  const db = useTestDatabase({ empty: true });
  // Node from this test's own PATH entry, nothing else: dist/ brings everything it needs but Node.
  const PATH = `${path.dirname(process.execPath)}${path.delimiter}/usr/bin${path.delimiter}/bin`;
  const start = (name: 'ingress' | 'worker' | 'console', env: Record<string, string>) => {
    const service = spawnService(name, { ...env, PATH }, { from: { command: path.join(dist, 'bin', name), cwd: dist } });
    running.push(service);
    return service;
  };

  beforeAll(async () => {
    const built = mkdtempSync(path.join(tmpdir(), 'bridge-dist-'));
    const elsewhere = mkdtempSync(path.join(tmpdir(), 'bridge-elsewhere-'));
    temporary.push(built, elsewhere);
    await buildDist(built);
    dist = path.join(elsewhere, 'app');
    renameSync(built, dist);
    sourcesFile = path.join(elsewhere, 'sources.json');
    const acme = {
      id: 'acme',
      scheme: 'hmac-sha256',
      secrets: [{ id: 'k1', env: 'ACME_SECRET' }],
      tenants: ['tenant_acme'],
      resourceTypes: ['theme'],
    };
    writeFileSync(sourcesFile, JSON.stringify({ sources: [acme] }));
  });
  afterAll(async () => {
    for (const service of running) await service.stop();
    for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
  });

  it('names no path of the machine it was built on', () => {
    const needle = Buffer.from(repoRoot);
    const naming = readdirSync(dist, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() || entry.isSymbolicLink())
      .map((entry) => path.join(entry.parentPath, entry.name))
      .filter((file) => (lstatSync(file).isSymbolicLink() ? readlinkSync(file).includes(repoRoot) : readFileSync(file).includes(needle)));
    expect(naming).toEqual([]);
  });

  it('migrates an empty database, then takes a signed webhook to an applied inbox row', { timeout: 180_000 }, async () => {
    const migrated = spawnSync(path.join(dist, 'bin', 'bridge'), ['migrate', '--json'], {
      cwd: dist,
      encoding: 'utf8',
      env: { PATH, DATABASE_URL: db.url },
    });
    expect(migrated.status, migrated.stderr).toBe(0);
    expect(migrated.stdout).toContain('"applied"');

    const { names } = await createTestTopics(testKafka(), { eventsPartitions: 1 });
    const common = { KAFKA_BROKERS: testBrokers().join(','), TOPIC_EVENTS: names.events, TOPIC_APPLIED: names.applied, LOG_LEVEL: 'info' };
    const group = uniqueName('theme-applier');
    const ingress = start('ingress', {
      ...common,
      WEBHOOK_SOURCES_FILE: sourcesFile,
      ACME_SECRET: HMAC_SECRET,
      PORT: '0',
      HOST: '127.0.0.1',
      ADMIN_PORT: '0',
    });
    const worker = start('worker', { ...common, DATABASE_URL: db.url, CONSUMER_GROUP: group, ADMIN_PORT: '0' });
    const consoleService = start('console', { ...common, DATABASE_URL: db.url, CONSUMER_GROUP: group, CONSOLE_PORT: '0' });

    const publicPort = (await ingress.line('ingress listening')).port as number;
    const [ingressAdmin, workerAdmin] = await Promise.all([ingress.adminPort(), worker.adminPort()]);
    const ready = async (port: number) => (await fetch(`http://127.0.0.1:${port}/readyz`)).ok;
    await eventually(async () => (await ready(ingressAdmin)) && (await ready(workerAdmin)), {
      timeoutMs: 90_000,
      message: 'the ingress and the worker ready',
    });

    const signed = signedRequest({ source: 'acme', secret: HMAC_SECRET });
    expect((await post(`http://127.0.0.1:${publicPort}`, signed)).status).toBe(202);
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ status: string }>('SELECT status FROM inbox_events WHERE event_id = $1', [signed.eventId]);
        return rows[0]?.status === 'applied';
      },
      { timeoutMs: 60_000, message: 'the event applied' },
    );

    // The console serves its pages and the assets it reads beside its bundle and from node_modules.
    const consoleUrl = (await consoleService.line('console listening')).url as string;
    expect(await (await fetch(`${consoleUrl}/healthz`)).json()).toEqual({ ok: true });
    for (const asset of ['console.css', 'console.js', 'uPlot.min.css']) {
      expect((await fetch(`${consoleUrl}/assets/${asset}`)).status, asset).toBe(200);
    }
    expect((await fetch(consoleUrl)).status).toBe(200);
    const [tenant, type, id] = signed.key.split('/') as [string, string, string];
    const page = await fetch(`${consoleUrl}/resource?${new URLSearchParams({ tenant, type, id })}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(signed.eventId);
  });
});
