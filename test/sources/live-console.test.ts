// The console with SOURCES_FROM=postgres: the resource page's Reconcile follows the sources in the
// database while it runs, as the workers' pulls do, and the console reports the version it serves.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../kit/db.ts';
import { eventually } from '../kit/eventually.ts';
import { topicNames } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { keyringFromEnv, SourceCatalog } from '#domain/sources/index.ts';
import { listInstances } from '#domain/store/sources.ts';
import { startConsole, type ConsoleHandle } from '#services/console/console.ts';
import { consoleTestConfig } from '../kit/console.ts';

const db = useTestDatabase();
let console_: ConsoleHandle;
const keyring = keyringFromEnv({ BRIDGE_SECRET_KEYS: `k:${randomBytes(32).toString('base64')}` })!;

beforeAll(async () => {
  console_ = await startConsole(
    consoleTestConfig({
      operatorToken: 'live-console-test-operator-token',
      databaseUrl: db.url,
      names: topicNames({ events: 'live-console.events', applied: 'live-console.applied', retryLevels: 1 }),
      group: 'live-console-test',
      logLevel: 'warn',
      sourcesFrom: 'postgres',
      secretKeyring: keyring,
    }),
    { logger: createLogger({ name: 'live-console-test', level: 'warn' }), env: { PROVIDER_TOKEN: 'provider-api-token-value' } },
  );
});
afterAll(async () => {
  await console_?.close();
});

const resourcePage = async () => (await fetch(`${console_.url}/resource?tenant=t_live&type=theme&id=thm_1`)).text();

describe('console with SOURCES_FROM=postgres', () => {
  it('offers Reconcile once a source gains `reconcile`, without a restart, and reports the version it serves', async () => {
    const catalog = new SourceCatalog(db.pool, keyring);
    const { source } = await catalog.create('test', {
      id: 'live',
      tenants: ['t_live'],
      resourceTypes: ['theme'],
      secrets: [{ id: 's1', generate: true }],
    });
    expect(await eventually(async () => (await resourcePage()).includes('No Reconcile here') && (await resourcePage()))).toMatch(
      /no source in Postgres \(SOURCES_FROM=postgres\) has/,
    );

    await catalog.update('test', 'live', source.revision, {
      id: 'live',
      tenants: ['t_live'],
      resourceTypes: ['theme'],
      reconcile: { url: 'http://127.0.0.1:9/themes/{id}', auth: { env: 'PROVIDER_TOKEN', prefix: 'Bearer ' } },
    });
    const version = await catalog.configVersion();
    // Signed out, an available Reconcile asks for a sign-in; an unavailable one says why.
    await eventually(async () => (await resourcePage()).includes('to reconcile.'), { message: 'Reconcile offered for the new source' });
    const page = await resourcePage();
    expect(page).not.toContain('No Reconcile here');
    expect(page).not.toContain('provider-api-token-value');
    await eventually(async () => (await listInstances(db.pool)).some((i) => i.role === 'console' && i.configVersion === version), {
      message: 'the console reports the version it serves',
    });
  });
});
