// The pulls a worker owes (reconcile_pulls): a trigger that arrives while its resource's pull runs
// is answered by a pull after it, and a pull longer than the claim's lease is never run twice at
// once by two workers. Real broker and Postgres (the harness's worker applies what is pulled), two
// reconcilers as two workers would run them, and a real HTTP server as the provider's API.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import type { ApplyResult } from '#domain/apply/index.ts';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import type { ReconcileSource } from '#domain/sources/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { createWorkerMetrics } from '#services/worker/metrics.ts';
import { startWorkerReconcile, type WorkerReconcile } from '#services/worker/reconcile/reconcile-triggers.ts';
import { freshEventId, freshId, hmacSource, SECRET_A, useHarness } from '../kit/harness.ts';
import { eventually } from '../kit/eventually.ts';
import { suiteFixture } from '../kit/fixture.ts';
import { reconcileSource } from '../kit/provider-api.ts';

const TENANT = 'tenant_owed';
const data = (name: string) => ({ ...sampleThemeEvent().data, name });

/**
 * The provider's API: each GET waits for the test's word (or a fixed hold), then answers the
 * resource's nth version for its nth request (the last one from then on); it counts requests per
 * resource and how many are in flight.
 */
interface HeldApi {
  url: string;
  versions: Map<string, number[]>;
  holdMs: number;
  gate: Promise<void> | undefined;
  asked: Map<string, number>;
  inFlight: Map<string, number>;
  mostInFlight: Map<string, number>;
  close: () => Promise<void>;
}

async function startHeldApi(): Promise<HeldApi> {
  const api: Omit<HeldApi, 'url' | 'close'> = {
    versions: new Map(),
    holdMs: 0,
    gate: undefined,
    asked: new Map(),
    inFlight: new Map(),
    mostInFlight: new Map(),
  };
  const server: Server = createServer((req, res) => {
    const id = (req.url ?? '').split('/').pop()!;
    const nth = (api.asked.get(id) ?? 0) + 1;
    api.asked.set(id, nth);
    const now = (api.inFlight.get(id) ?? 0) + 1;
    api.inFlight.set(id, now);
    api.mostInFlight.set(id, Math.max(now, api.mostInFlight.get(id) ?? 0));
    const gate = api.gate ?? Promise.resolve();
    void gate
      .then(() => new Promise((resolve) => setTimeout(resolve, api.holdMs)))
      .then(() => {
        api.inFlight.set(id, api.inFlight.get(id)! - 1);
        const versions = api.versions.get(id) ?? [];
        const version = versions[Math.min(nth, versions.length) - 1];
        if (version === undefined) {
          res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ version, data: data(`pulled v${version}`) }));
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(api, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

function source(url: string, over: Partial<ReconcileSource['reconcile']> = {}): ReconcileSource {
  return reconcileSource('owed', [TENANT], `${url}/owed/{id}`, { timeoutMs: 10_000, ...over });
}

const api = suiteFixture(startHeldApi, (held) => held.close());
// The harness's worker applies what the reconcilers publish; it pulls nothing itself.
const h = useHarness({ sources: [hmacSource('owed', SECRET_A, [TENANT])] }, { timeoutMs: 120_000 });
const running: WorkerReconcile[] = [];

afterAll(async () => {
  for (const r of running) await r.close();
});

function reconciler(name: string, leaseMs?: number): WorkerReconcile {
  const reconcile = startWorkerReconcile({
    config: { sources: [source(api.url)], concurrency: 2, queueLimit: 100, retryPollMs: 50 },
    kafka: h.kafka,
    pool: h.db.pool,
    eventsTopic: h.names.events,
    logger: createLogger({ name, level: 'silent' }),
    metrics: createWorkerMetrics(new Registry(), async () => 0),
    schedule: { delaysMs: [200, 200, 200], jitter: 0 },
    ...(leaseMs === undefined ? {} : { leaseMs }),
  });
  running.push(reconcile);
  return reconcile;
}

/** What the apply path reports for a committed event of source "owed" that calls for a pull. */
function result(id: string, outcome: 'applied' | 'quarantined', version: number): ApplyResult {
  return {
    record: { topic: h.names.events, partition: 0, offset: '0', key: null, value: null, headers: { source: 'owed' } },
    outcome,
    bodySha256: 'x',
    eventId: freshEventId(),
    resourceKey: `${TENANT}/theme/${id}`,
    resource: { tenantId: TENANT, type: 'theme', id },
    version,
    eventType: 'theme.updated',
    storedVersion: null,
  };
}

const owed = async (id: string) =>
  (await h.db.pool.query<{ status: string }>('SELECT status FROM reconcile_pulls WHERE tenant_id = $1 AND resource_id = $2', [TENANT, id]))
    .rows[0];

describe('a trigger that arrives while its resource is being pulled', () => {
  it('survives that pull: a pull after it answers it (regression: the running pull deleted the owed row)', async () => {
    const r = reconciler('coalesce');
    const id = freshId('thm');
    let release!: () => void;
    api.gate = new Promise<void>((resolve) => (release = resolve));
    // The first request is answered with v3 (the provider's state when it was asked), later ones v4.
    api.versions.set(id, [3, 4]);
    r.onResults([result(id, 'applied', 2)]);
    await eventually(async () => api.asked.get(id) === 1, { message: 'the first pull asked the API' });
    // Meanwhile the provider changes the resource, and a quarantine says the bridge's copy is wrong.
    r.onResults([result(id, 'quarantined', 2)]);
    await eventually(async () => (await owed(id))?.status === 'pending', { message: 'the quarantine recorded' });
    api.gate = undefined;
    release();
    await eventually(async () => (await h.state(TENANT, id))?.version === 4, {
      timeoutMs: 30_000,
      message: 'the quarantine answered by a pull after it (v4)',
    });
    expect(api.asked.get(id)).toBe(2);
    await eventually(async () => (await owed(id)) === undefined, { timeoutMs: 10_000, message: 'nothing owed' });
  });
});

describe('two workers and a pull longer than the lease', () => {
  it('never pull one resource at once: the claim is held for as long as the pull runs', async () => {
    api.holdMs = 4500;
    try {
      // A lease of 1.5 s and a pull of 4.5 s: without a renewed claim the other worker takes the row.
      // The lease is long enough that a loaded machine's late renewal (every half second) keeps it.
      const a = reconciler('worker-a', 1500);
      reconciler('worker-b', 1500);
      const id = freshId('thm');
      api.versions.set(id, [5]);
      a.onResults([result(id, 'applied', 2)]);
      await eventually(async () => (await h.state(TENANT, id))?.version === 5, { timeoutMs: 30_000, message: 'v5 applied' });
      await eventually(async () => (await owed(id)) === undefined, { timeoutMs: 10_000, message: 'nothing owed' });
      expect(api.mostInFlight.get(id)).toBe(1);
      expect(api.asked.get(id)).toBe(1);
    } finally {
      api.holdMs = 0;
    }
  });
});
