// Two ingresses with SOURCES_FROM=postgres and a worker, run as their own processes on the real
// broker and a Postgres of the test's own (so it can be stopped): a source created through the
// catalog verifies on both within the issue's 2 s, a rotation keeps both secrets until the old
// one's retireAfter, a disabled source is refused on both while what was accepted still applies,
// and a Postgres outage leaves known sources served. No secret value shows in any log or answer.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { keyringFromEnv, SourceCatalog } from '#domain/sources/index.ts';
import { migrate } from '#domain/store/migrate.ts';
import { createPool } from '#plumbing/db/pool.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import { ensureDatabase } from '../kit/infra.ts';
import { OwnPostgres } from '../kit/own-postgres.ts';
import { eventually } from '../kit/eventually.ts';
import { testBrokers, testKafka, createTestTopics } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { freePort } from '../kit/ports.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { stateOf, workerEnv } from '../kit/worker.ts';

const TENANT = 'tenant_live';
const SECRET_KEYS = `k1:${randomBytes(32).toString('base64')}`;
const keyring = keyringFromEnv({ BRIDGE_SECRET_KEYS: SECRET_KEYS })!;
/** Every secret value of the run: none may appear in a log or an answer. */
const secretValues: string[] = [];
/** Every answer body of the run. */
const answers: string[] = [];
const newSecret = () => {
  const value = `sv-${randomBytes(16).toString('hex')}`;
  secretValues.push(value);
  return value;
};

interface Ingress {
  name: string;
  process: ServiceProcess;
  port: number;
  adminPort: number;
}

let own: OwnPostgres;
let databaseUrl: string;
let pool: pg.Pool;
let catalog: SourceCatalog;
let names: TopicNames;
let worker: ServiceProcess;
const ingresses: Ingress[] = [];
const processes: ServiceProcess[] = [];

function connect(): void {
  pool = createPool({ url: databaseUrl, max: 3, applicationName: 'live-ingress-test' });
  pool.on('error', () => {}); // idle connections die with the server
  catalog = new SourceCatalog(pool, keyring);
}

function spawnIngress(): ServiceProcess {
  const child = spawnService('ingress', {
    KAFKA_BROKERS: testBrokers().join(','),
    TOPIC_EVENTS: names.events,
    PORT: '0',
    HOST: '127.0.0.1',
    ADMIN_PORT: '0',
    SOURCES_FROM: 'postgres',
    DATABASE_URL: databaseUrl,
    BRIDGE_SECRET_KEYS: SECRET_KEYS,
    LOG_LEVEL: 'info',
  });
  processes.push(child);
  return child;
}

async function started(name: string, child: ServiceProcess): Promise<Ingress> {
  const port = (await child.line('ingress listening')).port as number;
  return { name, process: child, port, adminPort: await child.adminPort() };
}

beforeAll(async () => {
  own = new OwnPostgres(await freePort());
  await own.init();
  await own.start();
  databaseUrl = await ensureDatabase(own.adminUrl, 'bridge');
  connect();
  await migrate(pool);
  ({ names } = await createTestTopics(testKafka(uniqueName('live-ingress'))));
  const spawned = [spawnIngress(), spawnIngress()];
  ingresses.push(...(await Promise.all(spawned.map((child, i) => started(`ingress-${i + 1}`, child)))));
  worker = spawnService('worker', {
    ...workerEnv({ brokers: testBrokers(), databaseUrl: databaseUrl, names, group: uniqueName('live-ingress-applier') }),
    ADMIN_PORT: '0',
    LOG_LEVEL: 'info',
    SOURCES_FROM: 'postgres',
  });
  processes.push(worker);
  await worker.line('joined consumer group');
  for (const ingress of ingresses)
    await eventually(async () => (await readyz(ingress)) === 200, { message: `${ingress.name} ready`, intervalMs: 50 });
}, 180_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await pool?.end().catch(() => {});
  await own?.destroy();
});

interface Sent {
  status: number;
  body: string;
  retryAfter: string | null;
  eventId: string;
}

/** A webhook of `source` signed with `secret`, for resource `resourceId` at `version`. */
async function post(ingress: Ingress, source: string, secret: string, resourceId = 'thm_live', version = Date.now()): Promise<Sent> {
  const event = sampleThemeEvent({ tenant_id: TENANT, resource: { type: 'theme', id: resourceId, version } });
  const body = JSON.stringify(event);
  const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id: event.event_id });
  const answer = await fetch(`http://127.0.0.1:${ingress.port}/webhooks/${source}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body,
  });
  const text = await answer.text();
  answers.push(text);
  return { status: answer.status, body: text, retryAfter: answer.headers.get('retry-after'), eventId: event.event_id };
}

async function readyz(ingress: Ingress): Promise<number> {
  const answer = await fetch(`http://127.0.0.1:${ingress.adminPort}/readyz`);
  answers.push(await answer.text());
  return answer.status;
}

/** A sample of the ingress's /metrics: the first line of `name` whose labels include `labels`. */
async function metric(ingress: Ingress, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${ingress.adminPort}/metrics`)).text();
  const line = text.split('\n').find((l) => (l.startsWith(`${name} `) || l.startsWith(`${name}{`)) && l.includes(labels));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Milliseconds from `since` until `ingress` answers `source` signed with `secret` with `status`, asking every 50 ms. */
async function until(since: number, ingress: Ingress, source: string, secret: string, status: number): Promise<number> {
  await eventually(async () => (await post(ingress, source, secret)).status === status, {
    intervalMs: 50,
    timeoutMs: 30_000,
    message: `${ingress.name}: ${status} for ${source}`,
  });
  return performance.now() - since;
}

const spec = (id: string) => ({ id, tenants: [TENANT], resourceTypes: ['theme'] });

describe('sources live on two ingresses', () => {
  it('a source created through the catalog takes a signed webhook with 202 on both ingresses within 2 s', async () => {
    const secret = newSecret();
    const unknown = await post(ingresses[0]!, 'alpha', secret);
    expect(unknown.status).toBe(401);
    await catalog.create('test', { ...spec('alpha'), secrets: [{ id: 'a1', value: secret }] });
    const since = performance.now();
    const ms = await Promise.all(ingresses.map((ingress) => until(since, ingress, 'alpha', secret, 202)));
    console.log(`propagation of a created source, commit -> first 202: ${ms.map((m) => `${m.toFixed(0)} ms`).join(', ')}`);
    // The issue's propagation goal, far above the measured figure; also guards liveness.
    for (const propagationMs of ms) expect(propagationMs).toBeLessThan(2000);
    const version = await catalog.configVersion();
    for (const ingress of ingresses) {
      await eventually(async () => (await metric(ingress, 'bridge_config_version')) === version, { message: 'bridge_config_version' });
      expect(await metric(ingress, 'bridge_config_source_healthy')).toBe(1);
      expect(await metric(ingress, 'webhook_signature_verifications_total', 'secret_id="a1"')).toBeGreaterThanOrEqual(1);
    }
  });

  it('a rotation: old and new secrets both verify during the overlap, the old one is refused after its retireAfter', async () => {
    const old = secretValues.at(-1)!;
    const next = newSecret();
    const { revision } = await catalog.get('alpha');
    const retireAfter = new Date(Date.now() + 4000);
    await catalog.rotate('test', 'alpha', revision, { secretId: 'a2', value: next, retireOthersAfter: retireAfter.toISOString() });
    const since = performance.now();
    const ms = await Promise.all(ingresses.map((ingress) => until(since, ingress, 'alpha', next, 202)));
    console.log(`propagation of a rotation, commit -> first 202 with the new secret: ${ms.map((m) => `${m.toFixed(0)} ms`).join(', ')}`);
    for (const ingress of ingresses) {
      expect((await post(ingress, 'alpha', old)).status).toBe(202);
      expect((await post(ingress, 'alpha', next)).status).toBe(202);
      expect(await metric(ingress, 'webhook_secret_retire_after_timestamp_seconds', 'secret_id="a1"')).toBe(retireAfter.getTime() / 1000);
    }
    // Both were seen inside the overlap, or the check above proved nothing.
    const seenBothAt = Date.now();
    expect(retireAfter.getTime()).toBeGreaterThan(seenBothAt);
    for (const ingress of ingresses) {
      const refused = await eventually(
        async () => {
          const sent = await post(ingress, 'alpha', old);
          return sent.status === 401 ? { at: Date.now(), sent } : undefined;
        },
        { intervalMs: 50, timeoutMs: 30_000, message: `${ingress.name}: the old secret refused` },
      );
      expect(refused.at).toBeGreaterThanOrEqual(retireAfter.getTime());
      expect(JSON.parse(refused.sent.body)).toEqual({ error: 'unauthorized' });
      expect((await post(ingress, 'alpha', next)).status).toBe(202);
      expect(await metric(ingress, 'webhook_signature_failures_total', 'reason="secret_retired"')).toBeGreaterThanOrEqual(1);
    }
  });

  it('a disabled source is answered 401 on both within 2 s; what was accepted before still applies', async () => {
    const secret = newSecret();
    await catalog.create('test', { ...spec('gamma'), secrets: [{ id: 'g1', value: secret }] });
    await Promise.all(ingresses.map((ingress) => until(performance.now(), ingress, 'gamma', secret, 202)));

    // Webhooks keep arriving on both while the source is disabled: each 202 is an event the bridge owes.
    const accepted: string[] = [];
    let sending = true;
    let n = 0;
    const traffic = ingresses.map(async (ingress) => {
      while (sending) {
        const resourceId = `thm_gamma_${ingress.name}_${(n += 1)}`;
        const sent = await post(ingress, 'gamma', secret, resourceId, 1);
        if (sent.status === 202) accepted.push(resourceId);
        else expect(sent.status).toBe(401);
      }
    });
    await eventually(() => accepted.length >= 10, { intervalMs: 20, message: 'traffic flowing' });
    const { revision } = await catalog.get('gamma');
    await catalog.setEnabled('test', 'gamma', revision, false);
    const since = performance.now();
    const ms = await Promise.all(ingresses.map((ingress) => until(since, ingress, 'gamma', secret, 401)));
    sending = false;
    await Promise.all(traffic);
    console.log(`propagation of a disable, commit -> first 401: ${ms.map((m) => `${m.toFixed(0)} ms`).join(', ')}`);
    // The issue's propagation goal, far above the measured figure; also guards liveness.
    for (const propagationMs of ms) expect(propagationMs).toBeLessThan(2000);
    for (const ingress of ingresses) {
      const refused = await post(ingress, 'gamma', secret);
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body)).toEqual({ error: 'unauthorized' });
    }
    for (const resourceId of accepted)
      await eventually(async () => (await stateOf(pool, TENANT, resourceId))?.version === 1, { message: `${resourceId} applied` });
  });

  it('Postgres stopped: known sources still 202, readiness unaffected, the gauge says so; after it is back a change propagates', async () => {
    const secret = newSecret();
    await catalog.create('test', { ...spec('delta'), secrets: [{ id: 'd1', value: secret }] });
    await Promise.all(ingresses.map((ingress) => until(performance.now(), ingress, 'delta', secret, 202)));

    await pool.end();
    await own.stop();
    for (const ingress of ingresses) {
      await eventually(async () => (await metric(ingress, 'bridge_config_source_healthy')) === 0, {
        message: `${ingress.name}: bridge_config_source_healthy 0`,
      });
      for (let i = 0; i < 5; i += 1) expect((await post(ingress, 'delta', secret)).status).toBe(202);
      expect(await readyz(ingress)).toBe(200);
    }

    // An ingress started while Postgres is down says so, is not ready and serves nothing yet.
    const late = spawnIngress();
    const third = await started('ingress-late', late);
    await late.line('sources: cannot load them from Postgres; serving none until it answers (no last known set is kept on disk)');
    expect(await readyz(third)).toBe(503);
    expect(JSON.parse(answers.at(-1)!)).toMatchObject({ ready: false, checks: { sources: false } });
    const early = await post(third, 'delta', secret);
    expect(early).toMatchObject({ status: 503, retryAfter: '5' });
    expect(JSON.parse(early.body)).toEqual({ error: 'unavailable' });
    expect(await metric(third, 'bridge_config_version')).toBe(-1);

    await own.start();
    connect();
    await eventually(async () => (await readyz(third)) === 200, { message: 'the late ingress ready once Postgres is back' });
    expect((await post(third, 'delta', secret)).status).toBe(202);
    const all = [...ingresses, third];
    for (const ingress of all)
      await eventually(async () => (await metric(ingress, 'bridge_config_source_healthy')) === 1, { message: `${ingress.name}: healthy` });

    const after = newSecret();
    await catalog.create('test', { ...spec('epsilon'), secrets: [{ id: 'e1', value: after }] });
    const since = performance.now();
    const ms = await Promise.all(all.map((ingress) => until(since, ingress, 'epsilon', after, 202)));
    console.log(`propagation after Postgres came back, commit -> first 202: ${ms.map((m) => `${m.toFixed(0)} ms`).join(', ')}`);
  }, 120_000);

  it('no secret value appears in any log or answer of the run', async () => {
    // A generated secret, shown once to its caller (here), then looked for like the others.
    const created = await catalog.create('test', { ...spec('zeta'), secrets: [{ id: 'z1', generate: true }] });
    secretValues.push(...created.generated.map((g) => g.value));
    await Promise.all(ingresses.map((ingress) => until(performance.now(), ingress, 'zeta', created.generated[0]!.value, 202)));
    await Promise.all(processes.map((p) => p.stop()));
    const logs = processes.map((p) => p.output());
    logs.push(readFileSync(path.join(path.dirname(own.dataDir), 'server.log'), 'utf8'));
    expect(secretValues.length).toBeGreaterThanOrEqual(6);
    expect(answers.length).toBeGreaterThan(50);
    for (const value of secretValues) {
      for (const text of [...logs, ...answers]) expect(text.includes(value), 'a secret value in a log or an answer').toBe(false);
    }
  });
});
