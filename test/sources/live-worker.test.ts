// A worker with SOURCES_FROM=postgres, run as its own process: a source that gains `reconcile`
// through the catalog is pulled from without a restart, a source whose API credential the worker
// lacks is left out with a log line (the worker goes on), and the worker's metrics show the
// configuration version it serves. Real broker, real Postgres, a real HTTP server as the provider.
import { createHash, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { encodeEventHeaders } from '#domain/contract/event-headers.ts';
import { resourceKey, sampleThemeEvent } from '#domain/contract/index.ts';
import { keyringFromEnv, SourceCatalog } from '#domain/sources/index.ts';
import { useTestDatabase } from '../kit/db.ts';
import { eventually } from '../kit/eventually.ts';
import { testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { useService } from '../kit/service.ts';
import { useProviderApi } from '../kit/provider-api.ts';
import { stateOf, workerEnv } from '../kit/worker.ts';
import { freshEventId, freshId } from '../kit/harness.ts';

const TENANT = 'tenant_live';
const TOKEN = `provider-token-${randomBytes(8).toString('hex')}`;
const keyring = keyringFromEnv({ BRIDGE_SECRET_KEYS: `k1:${randomBytes(32).toString('base64')}` })!;
const base = { tenants: [TENANT], resourceTypes: ['theme'] };

const db = useTestDatabase();
const kafka = testKafka();
const api = useProviderApi();
const { names } = useTestTopics(kafka);
const eventsTopic = names.events;
let catalog: SourceCatalog;

beforeAll(async () => {
  catalog = new SourceCatalog(db.pool, keyring);
  // No source pulls at start.
  await catalog.create('test', { id: 'prov', ...base, secrets: [{ id: 'p1', generate: true }] });
});

const worker = useService(
  'worker',
  () => ({
    ...workerEnv({ brokers: testBrokers(), databaseUrl: db.url, names, group: uniqueName('theme-applier') }),
    ADMIN_PORT: '0',
    LOG_LEVEL: 'info',
    SOURCES_FROM: 'postgres',
    PROVIDER_TOKEN: TOKEN,
  }),
  { until: 'joined consumer group', timeoutMs: 120_000 },
);

/** Events of source "prov" as the ingress writes them (the worker reads the source from the header). */
async function publish(id: string, versions: number[]): Promise<void> {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    for (const version of versions) {
      const event = {
        ...sampleThemeEvent({ tenant_id: TENANT, event_type: 'theme.updated', resource: { type: 'theme', id, version } }),
        event_id: freshEventId(),
      };
      const value = Buffer.from(JSON.stringify(event));
      const headers = encodeEventHeaders({
        eventId: event.event_id,
        source: 'prov',
        receivedAt: new Date(),
        bodySha256: createHash('sha256').update(value).digest('hex'),
        eventType: event.event_type,
      });
      await producer.send({ topic: eventsTopic, acks: -1, messages: [{ key: resourceKey(event), value, headers }] });
    }
  } finally {
    await producer.disconnect();
  }
}

/** The worker's first log line that matches, parsed (undefined: none yet). */
function logged(match: (fields: Record<string, unknown>) => boolean): Record<string, unknown> | undefined {
  return worker
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find(match);
}

async function metric(name: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${await worker.adminPort()}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

describe('a worker following the sources in Postgres', () => {
  it('pulls for a source that gains reconcile while it runs, and exports the version it serves', async () => {
    const first = await catalog.configVersion();
    await eventually(async () => (await metric('bridge_config_version')) === first, { message: `bridge_config_version ${first}` });
    expect(await metric('bridge_config_source_healthy')).toBe(1);

    // A version gap before any source pulls: applied, nothing asked.
    const before = freshId('thm');
    await publish(before, [1, 5]);
    await eventually(async () => (await stateOf(db.pool, TENANT, before))?.version === 5, { message: 'v5 applied without a pull' });

    const { revision } = await catalog.get('prov');
    await catalog.update('test', 'prov', revision, {
      id: 'prov',
      ...base,
      reconcile: {
        url: `${api.url}/api/{tenant}/{type}s/{id}`,
        auth: { header: 'Authorization', env: 'PROVIDER_TOKEN', prefix: 'Bearer ' },
        retryDelayMs: 0,
      },
    });
    // A credential the worker does not have: left out, logged, the worker goes on.
    await catalog.create('test', {
      id: 'nocred',
      tenants: ['tenant_nocred'],
      resourceTypes: ['theme'],
      reconcile: { url: `${api.url}/nocred/{id}`, auth: { header: 'Authorization', env: 'NOCRED_TOKEN' } },
      secrets: [{ id: 'n1', generate: true }],
    });
    const latest = await catalog.configVersion();
    expect(latest).toBeGreaterThan(first);
    await eventually(async () => (await metric('bridge_config_version')) === latest, { message: `bridge_config_version ${latest}` });
    await worker.line('reconcile sources replaced', (f) => f.version === latest);
    const refused = await eventually(
      async () =>
        logged(
          (f) =>
            f.msg ===
            'reconcile: source "nocred" pulls nothing: source "nocred" reconcile.auth: environment variable NOCRED_TOKEN is not set',
        ),
      { message: 'the source without a credential logged' },
    );
    expect(refused.level).toBe('error');

    const after = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${after}`, { status: 200, body: { version: 7, data: sampleThemeEvent().data } });
    await publish(after, [1, 5]);
    await eventually(async () => (await stateOf(db.pool, TENANT, after))?.version === 7, {
      timeoutMs: 30_000,
      message: 'the gap pulled v7 from the source that gained reconcile',
    });
    expect(api.requests.find((r) => r.path.includes(after))?.authorization).toBe(`Bearer ${TOKEN}`);
    // The earlier gap came before the source had reconcile: never asked, nothing owed.
    expect(api.requests.filter((r) => r.path.includes(before))).toEqual([]);
    const owed = await db.pool.query('SELECT 1 FROM reconcile_pulls WHERE resource_id = $1', [before]);
    expect(owed.rowCount).toBe(0);
    expect(worker.child.exitCode).toBeNull();
    // The worker opens no secret (it verifies no webhook): no error line but the one about the credential.
    const errors = worker
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: string; msg: string })
      .filter((l) => l.level === 'error' || l.level === 'fatal');
    expect(errors.map((l) => l.msg)).toEqual([refused.msg]);
    expect(worker.output()).not.toContain(TOKEN);
  });
});
