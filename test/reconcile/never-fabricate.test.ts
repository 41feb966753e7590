// Issue 31, part 3: a pull only ever applies what the provider's API states, with the provider's
// own version. Real broker, real Postgres, and a real HTTP server (node:http) as the provider's API.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createGzip } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { Reconciler, type EventsRecord } from '#domain/reconcile/index.ts';
import { loadStrictSchema, type ReconcileSource } from '#domain/sources/index.ts';
import { failureSettingsFrom, failuresEnv } from '#domain/failures/index.ts';
import { parseConfig } from '#plumbing/config/env.ts';
import type { WorkerConfig } from '#services/worker/config.ts';
import { startWorker, type WorkerHandle } from '#services/worker/worker.ts';
import { startConsole } from '#services/console/console.ts';
import { createWorkerMetrics } from '#services/worker/metrics.ts';
import { startWorkerReconcile } from '#services/worker/reconcile/reconcile-triggers.ts';
import { Registry } from 'prom-client';
import { createLogger } from '#plumbing/logging/logger.ts';
import { freshEventId, freshId, hmacSource, SECRET_A, useHarness } from '../kit/harness.ts';
import { testBrokers } from '../kit/kafka.ts';
import { workerTestConfig } from '../kit/worker.ts';
import { useProviderApi, reconcileSource } from '../kit/provider-api.ts';
import { eventually } from '../kit/eventually.ts';

const TENANT = 'tenant_acme';
const OTHER_TENANT = 'tenant_other';
// Long enough at the end that a worker can be stopped between two retries.
const PULL_RETRY_DELAYS_MS = [200, 400, 5000, 5000];
const data = (name: string) => ({ ...sampleThemeEvent().data, name });

const api = useProviderApi();
let workerOverrides: Partial<WorkerConfig>;
const h = useHarness(
  () => {
    workerOverrides = {
      // A shortened retry chain (production: 5 s, 30 s, 2 min, 10 min, with jitter): failed pulls are retried on it too.
      failures: failureSettingsFrom(parseConfig(failuresEnv, { RETRY_DELAYS_MS: PULL_RETRY_DELAYS_MS.join(','), RETRY_JITTER: '0' })),
      reconcile: {
        concurrency: 2,
        queueLimit: 100,
        // Checked often here; production default in services/worker/config.ts.
        retryPollMs: 100,
        sources: [
          reconcileSource('prov', [TENANT], `${api.url}/api/{tenant}/{type}s/{id}`),
          reconcileSource('down', [TENANT], `${api.url}/down/{id}`),
        ],
      },
    };
    return {
      sources: [hmacSource('prov', SECRET_A, [TENANT]), hmacSource('down', SECRET_A, [TENANT])],
      worker: workerOverrides,
    };
  },
  { timeoutMs: 120_000 },
);
let restarted: WorkerHandle | undefined;

afterAll(async () => {
  await restarted?.close();
});

const post = async (source: string, event: object) => expect((await h.post(source, JSON.stringify(event))).status).toBe(202);
const event = (id: string, version: number, type: 'created' | 'updated' | 'deleted', name = `v${version}`) => ({
  ...sampleThemeEvent({ tenant_id: TENANT, event_type: `theme.${type}`, resource: { type: 'theme', id, version }, data: data(name) }),
  event_id: freshEventId(),
});
const metric = async (worker: WorkerHandle, trigger: string, outcome: string) => {
  const values = (await worker.registry.getSingleMetric('reconciliations_total')!.get()).values;
  return values.find((v) => v.labels.trigger === trigger && v.labels.outcome === outcome)?.value ?? 0;
};
const fromReconcile = async (id: string) =>
  (
    await h.db.pool.query<{ status: string; event_type: string | null }>(
      `SELECT status, payload::json->>'event_type' AS event_type FROM inbox_events
       WHERE tenant_id = $1 AND resource_id = $2 AND source = 'reconcile'`,
      [TENANT, id],
    )
  ).rows;
const pullRecord = async (id: string) =>
  (
    await h.db.pool.query<{ status: string; last_outcome: string; attempts: number; trigger: string }>(
      `SELECT status, last_outcome, attempts, trigger FROM reconcile_pulls WHERE tenant_id = $1 AND resource_id = $2`,
      [TENANT, id],
    )
  ).rows[0];

describe('a 404 is evidence for an operator, never a delete at an invented version', () => {
  it('unseen: an API that always answers 404 leaves v5 as pushed, and the real v6 applies (regression: tombstone v6, then v6 dropped)', async () => {
    const id = freshId('thm');
    await post('prov', event(id, 5, 'updated', 'pushed v5'));
    await eventually(async () => api.count(`/api/${TENANT}/themes/${id}`) >= 1, { timeoutMs: 30_000, message: 'the pull asked the API' });
    await h.worker.reconcile!.idle();
    await h.settle();
    expect(await h.state(TENANT, id)).toMatchObject({ version: 5, deleted: false, data: { name: 'pushed v5' } });
    await post('prov', event(id, 6, 'updated', 'real v6'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 6, { timeoutMs: 30_000, message: 'v6 applied' });
    expect(await h.state(TENANT, id)).toMatchObject({ version: 6, deleted: false, data: { name: 'real v6' } });
    expect(await fromReconcile(id)).toEqual([]);
    expect(await metric(h.worker, 'unseen', 'gone')).toBeGreaterThanOrEqual(1);
    // Recorded for an operator, not retried, and shown in the console.
    expect(await pullRecord(id)).toMatchObject({ status: 'gone', last_outcome: 'gone', trigger: 'unseen' });
    const consoleHandle = await startConsole(
      {
        port: 0,
        host: '127.0.0.1',
        operatorToken: undefined,
        brokers: testBrokers(),
        databaseUrl: h.db.url,
        statementTimeoutMs: 10_000,
        names: h.names,
        group: h.groupId,
        ingressMetricsUrl: `${h.ingress.adminUrl}/metrics`,
        logLevel: 'silent',
      },
      { logger: createLogger({ name: 'console-reconcile', level: 'silent' }), env: {} },
    );
    try {
      const listed = await (await fetch(`${consoleHandle.url}/reconcile`)).text();
      expect(listed).toContain(`${TENANT}/theme/${id}`);
      const one = await (await fetch(`${consoleHandle.url}/reconcile?tenant=${TENANT}&type=theme&id=${id}`)).text();
      expect(one).toMatch(/data-testid="reconcile-pull-status">gone</);
      expect(one).toContain('HTTP 404');
    } finally {
      await consoleHandle.close();
    }
  });

  it('gap: a 404 publishes nothing; the pushed update that triggered the pull stays applied', async () => {
    const id = freshId('thm');
    await post('prov', event(id, 1, 'created'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 1, { message: 'v1 applied' });
    await post('prov', event(id, 3, 'updated', 'pushed v3'));
    await eventually(async () => api.count(`/api/${TENANT}/themes/${id}`) >= 1, { timeoutMs: 30_000, message: 'the pull asked the API' });
    await h.worker.reconcile!.idle();
    await h.settle();
    expect(await h.state(TENANT, id)).toMatchObject({ version: 3, deleted: false, data: { name: 'pushed v3' } });
    expect(await fromReconcile(id)).toEqual([]);
  });

  it('a 404 for a resource the pushed delete left as a tombstone agrees with it: nothing for an operator', async () => {
    const id = freshId('thm');
    await post('prov', { ...event(id, 3, 'deleted'), data: {} });
    await eventually(async () => api.count(`/api/${TENANT}/themes/${id}`) >= 1, { timeoutMs: 30_000, message: 'the pull asked the API' });
    await h.worker.reconcile!.idle();
    expect(await h.state(TENANT, id)).toMatchObject({ version: 3, deleted: true });
    await eventually(async () => (await pullRecord(id)) === undefined, { timeoutMs: 10_000, message: 'no pull owed' });
  });

  it("a 410 that states the deletion's version leaves a tombstone at the provider's version", async () => {
    const id = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 410, body: { version: 8 } });
    await post('prov', event(id, 1, 'created'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 1, { message: 'v1 applied' });
    await post('prov', event(id, 4, 'updated'));
    await eventually(async () => (await h.state(TENANT, id))?.deleted === true, { timeoutMs: 30_000, message: 'tombstone v8' });
    expect((await h.state(TENANT, id))!.version).toBe(8);
    expect(await fromReconcile(id)).toEqual([{ status: 'applied', event_type: 'theme.deleted' }]);
  });
});

describe('what a pull may apply', () => {
  it('a pulled version absurdly far ahead (2^53-1) is refused and does not freeze the resource', async () => {
    const id = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { version: Number.MAX_SAFE_INTEGER, data: data('absurd') } });
    await post('prov', event(id, 1, 'created'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 1, { message: 'v1 applied' });
    await post('prov', event(id, 3, 'updated'));
    await eventually(async () => api.count(`/api/${TENANT}/themes/${id}`) >= 1, { timeoutMs: 30_000, message: 'the pull asked the API' });
    await h.worker.reconcile!.idle();
    await h.settle();
    expect((await h.state(TENANT, id))!.version).toBe(3);
    await post('prov', event(id, 4, 'updated', 'real v4'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 4, { timeoutMs: 30_000, message: 'v4 applied' });
    expect(await pullRecord(id)).toMatchObject({ status: 'failed', last_outcome: 'implausible' });
  });
});

describe('a failed pull is durable and retried with the backoff', () => {
  it("is retried on the retry chain's schedule, then left failed for an operator", async () => {
    const id = freshId('thm');
    const asked: number[] = [];
    api.replies.set(`/down/${id}`, () => (asked.push(Date.now()), { status: 503, body: { error: 'down' } }));
    await post('down', event(id, 2, 'updated'));
    await eventually(async () => (await pullRecord(id))?.status === 'failed', { timeoutMs: 60_000, message: 'retries exhausted' });
    // One pull and one per level of the schedule, each at least its delay after the one before.
    expect(asked).toHaveLength(1 + PULL_RETRY_DELAYS_MS.length);
    asked.slice(1).forEach((at, i) => expect(at - asked[i]!).toBeGreaterThanOrEqual(PULL_RETRY_DELAYS_MS[i]! - 20));
    expect(await pullRecord(id)).toMatchObject({ status: 'failed', last_outcome: 'failed', attempts: 5 });
    expect(await metric(h.worker, 'unseen', 'exhausted')).toBe(1);
    expect((await h.state(TENANT, id))!.version).toBe(2);
  });

  it('survives a worker restart and applies once the API answers', async () => {
    const id = freshId('thm');
    const where = `/down/${id}`;
    api.replies.set(where, { status: 503, body: { error: 'down' } });
    await post('down', event(id, 2, 'updated'));
    await eventually(async () => (await pullRecord(id))?.status === 'retrying', {
      timeoutMs: 30_000,
      message: 'the pull was recorded as failed',
    });
    expect(await metric(h.worker, 'unseen', 'failed')).toBeGreaterThanOrEqual(1);
    await h.worker.close();
    const asked = api.count(where);
    api.replies.set(where, { status: 200, body: { version: 9, data: data('after the restart') } });
    restarted = await startWorker(
      workerTestConfig({
        brokers: testBrokers(),
        databaseUrl: h.db.url,
        eventsTopic: h.names.events,
        appliedTopic: h.names.applied,
        overrides: { ...workerOverrides, retryLevels: h.names.retries.length, groupId: h.groupId },
      }),
      { adminServer: false },
    );
    await eventually(async () => (await h.state(TENANT, id))?.version === 9, {
      timeoutMs: 30_000,
      message: 'v9 applied after the restart',
    });
    expect(api.count(where)).toBeGreaterThan(asked);
    await eventually(async () => (await pullRecord(id)) === undefined, { timeoutMs: 10_000, message: 'the record is resolved' });
  });
});

describe('a pull dropped from a full queue', () => {
  it('is recorded and pulled once the queue has room', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const server = createServer((req, res) => {
      void gate.then(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ version: 3, data: data(`pulled ${req.url}`) }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/q/{id}`;
    const registry = new Registry();
    const metrics = createWorkerMetrics(registry, async () => 0);
    const reconcile = startWorkerReconcile({
      config: { sources: [reconcileSource('queue', [TENANT], url)], concurrency: 1, queueLimit: 1, retryPollMs: 100 },
      kafka: h.kafka,
      pool: h.db.pool,
      eventsTopic: h.names.events,
      logger: createLogger({ name: 'reconcile-queue-test', level: 'silent' }),
      metrics,
      schedule: { delaysMs: [300], jitter: 0 },
    });
    try {
      const ids = [freshId('q'), freshId('q'), freshId('q')];
      // What the apply path reports for an update of a resource never stored, from source "queue".
      reconcile.onResults(
        ids.map((id) => ({
          record: { topic: h.names.events, partition: 0, offset: '0', key: null, value: null, headers: { source: 'queue' } },
          outcome: 'applied',
          bodySha256: 'x',
          eventId: freshEventId(),
          resourceKey: `${TENANT}/theme/${id}`,
          resource: { tenantId: TENANT, type: 'theme', id },
          version: 2,
          eventType: 'theme.updated',
          storedVersion: null,
        })),
      );
      // One runs (held at the API), one waits, the third is dropped: recorded, not lost.
      await eventually(async () => (await pullRecord(ids[2]!))?.status === 'pending', {
        timeoutMs: 10_000,
        message: 'the dropped pull recorded',
      });
      const { rows } = await h.db.pool.query<{ last_reason: string }>('SELECT last_reason FROM reconcile_pulls WHERE resource_id = $1', [
        ids[2],
      ]);
      expect(rows[0]!.last_reason).toBe('reconcile queue full');
      const dropped = (await registry.getSingleMetric('reconciliations_total')!.get()).values.find((v) => v.labels.outcome === 'dropped');
      expect(dropped?.value).toBe(1);
      release();
      for (const id of ids)
        await eventually(async () => (await h.state(TENANT, id))?.version === 3, {
          timeoutMs: 30_000,
          message: `${id} pulled and applied`,
        });
      await eventually(async () => (await Promise.all(ids.map(pullRecord))).every((r) => r === undefined), {
        timeoutMs: 10_000,
        message: 'nothing owed',
      });
    } finally {
      await reconcile.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('the request and the answer, against a real HTTP server', () => {
  let server: Server;
  let base: string;
  const seen: string[] = [];
  const written = { bytes: 0, closed: false };

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.url ?? '');
      if (req.url?.startsWith('/endless')) {
        // Never ends: only a limit on the bytes read stops the client before its timeout.
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        const pump = () => {
          while (!res.destroyed && res.write(chunk)) written.bytes += chunk.length;
          if (!res.destroyed) res.once('drain', pump);
        };
        res.on('close', () => (written.closed = true));
        res.write('{"version":1,"data":{"pad":"');
        pump();
        return;
      }
      if (req.url?.startsWith('/bomb')) {
        // A small gzip stream of zeros that decompresses without end.
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        const gzip = createGzip();
        gzip.pipe(res);
        const zeros = Buffer.alloc(1024 * 1024, 0x30);
        const pump = () => {
          while (!res.destroyed && gzip.write(zeros));
          if (!res.destroyed) gzip.once('drain', pump);
        };
        res.on('close', () => gzip.destroy());
        gzip.write('{"version":1,"data":{"pad":"');
        pump();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      // /extra: a field the strict schema does not allow.
      const extra = req.url?.startsWith('/extra') ? { not_in_the_schema: true } : {};
      res.end(JSON.stringify({ version: 2, data: { ...data('echo'), ...extra } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const published: EventsRecord[] = [];
  const reconciler = (sources: ReconcileSource[]) =>
    new Reconciler({ pool: h.db.pool, sources, publish: async (r) => void published.push(r) });

  it('ids "." and ".." (valid contract ids) never change the requested path', async () => {
    const r = reconciler([reconcileSource('paths', [TENANT], `${base}/api/{tenant}/{type}s/{id}?v=1`)]);
    for (const id of ['.', '..', '...', 'a..b']) {
      seen.length = 0;
      const report = await r.reconcile({ tenantId: TENANT, type: 'theme', id, trigger: 'operator', dryRun: true });
      expect(report.outcome, report.reason).toBe('applied');
      expect(seen).toHaveLength(1);
      const requested = seen[0]!;
      expect(requested.split('?')[0]!.split('/')).toHaveLength(5);
      expect(decodeURIComponent(requested.split('?')[0]!.split('/')[4]!)).toBe(id);
      expect(requested).toMatch(new RegExp(`^/api/${TENANT}/themes/`));
    }
  });

  it('stops reading at the 1 MiB limit instead of reading the whole answer', async () => {
    const r = reconciler([reconcileSource('big', [TENANT], `${base}/endless/{id}`, { timeoutMs: 20_000 })]);
    const report = await r.reconcile({ tenantId: TENANT, type: 'theme', id: 'x', trigger: 'operator', dryRun: true });
    expect(report.outcome).toBe('failed');
    // The limit's reason, not the 20 s request timeout's: it stopped reading at the limit.
    expect(report.reason).toMatch(/1048576 bytes/);
    await eventually(async () => written.closed, { timeoutMs: 5000, message: 'the server saw the connection closed' });
  });

  it('stops at the limit for a gzip answer too (counting what it decompresses to)', async () => {
    const r = reconciler([reconcileSource('bomb', [TENANT], `${base}/bomb/{id}`, { timeoutMs: 20_000 })]);
    const report = await r.reconcile({ tenantId: TENANT, type: 'theme', id: 'x', trigger: 'operator', dryRun: true });
    expect(report.outcome).toBe('failed');
    // The limit's reason, not the 20 s request timeout's: it stopped reading at the limit.
    expect(report.reason).toMatch(/1048576 bytes/);
  });

  it("runs a pulled snapshot through the source's strict schema, as the ingress does a pushed one", async () => {
    const strict = loadStrictSchema(path.resolve('infra/dev/strict-schemas/theme.strict.schema.json'), process.cwd());
    const source = (url: string) => ({ ...reconcileSource('strict', [TENANT], url), strictSchemas: { theme: strict } });
    const conforming = await reconciler([source(`${base}/api/{tenant}/{type}s/{id}`)]).reconcile({
      tenantId: TENANT,
      type: 'theme',
      id: 'thm_x',
      trigger: 'operator',
      dryRun: true,
    });
    expect(conforming.outcome, conforming.reason).toBe('applied');
    const refused = await reconciler([source(`${base}/extra/{id}`)]).reconcile({
      tenantId: TENANT,
      type: 'theme',
      id: 'thm_x',
      trigger: 'operator',
      dryRun: true,
    });
    expect(refused.outcome).toBe('invalid');
    expect(refused.reason).toMatch(/strict_schema/);
  });

  it('an explicit source must own the tenant and type (CLI --source, console source field)', async () => {
    const r = reconciler([reconcileSource('owner', [TENANT], `${base}/api/{tenant}/{type}s/{id}`)]);
    seen.length = 0;
    const error = await r
      .reconcile({ tenantId: OTHER_TENANT, type: 'theme', id: 'thm_x', trigger: 'operator', sourceId: 'owner', dryRun: false })
      .catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe('reconcile_not_configured');
    const otherType = await r
      .reconcile({ tenantId: TENANT, type: 'palette', id: 'p1', trigger: 'operator', sourceId: 'owner', dryRun: false })
      .catch((e: unknown) => e);
    expect((otherType as { code?: string }).code).toBe('reconcile_not_configured');
    expect(seen).toEqual([]);
    expect(published).toEqual([]);
  });
});
