import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import type { ReconcileSource } from '#domain/sources/index.ts';
import { freshEventId, freshId, hmacSource, SECRET_A, useHarness } from '../kit/harness.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { testBrokers } from '../kit/kafka.ts';
import { useProviderApi, reconcileSource as kitSource } from '../kit/provider-api.ts';
import { eventually, sleep } from '../kit/eventually.ts';

const TENANT = 'tenant_acme';
// The ingress lets source "prov" publish for this tenant too, but its reconcile settings do not cover it.
const OTHER_TENANT = 'tenant_not_reconciled';
const TOKEN = 'provider-api-token-for-tests';
const data = (name: string) => ({ ...sampleThemeEvent().data, name });

/** The kit's source with this file's pull settings: authorised, three tries, a breaker that opens soon. */
function reconcileSource(id: string, url: string, over: Partial<ReconcileSource['reconcile']> = {}): ReconcileSource {
  return kitSource(id, [TENANT], url, {
    auth: { header: 'Authorization', value: `Bearer ${TOKEN}` },
    attempts: 3,
    retryDelayMs: 20,
    rateLimit: { perSecond: 50, burst: 50 },
    breaker: { failureThreshold: 5, cooldownMs: 30_000 },
    ...over,
  });
}

const api = useProviderApi();
const h = useHarness(
  () => ({
    sources: [hmacSource('prov', SECRET_A, [TENANT, OTHER_TENANT]), hmacSource('flaky', SECRET_A, [TENANT])],
    worker: {
      reconcile: {
        concurrency: 2,
        queueLimit: 100,
        sources: [
          reconcileSource('prov', `${api.url}/api/{tenant}/{type}s/{id}`),
          // Two tries per pull, 200 ms timeout, the breaker opens after 3 failures for 1.5 s.
          reconcileSource('flaky', `${api.url}/flaky/{id}`, {
            attempts: 2,
            timeoutMs: 200,
            breaker: { failureThreshold: 3, cooldownMs: 1500 },
          }),
        ],
      },
    },
  }),
  { timeoutMs: 120_000 },
);

const post = async (source: string, event: object) => expect((await h.post(source, JSON.stringify(event))).status).toBe(202);
const event = (id: string, version: number, type: 'created' | 'updated' | 'deleted', name = `v${version}`, eventId = freshEventId()) => ({
  ...sampleThemeEvent({ tenant_id: TENANT, event_type: `theme.${type}`, resource: { type: 'theme', id, version }, data: data(name) }),
  event_id: eventId,
});
const metric = async (trigger: string, outcome: string) => {
  const values = (await h.worker.registry.getSingleMetric('reconciliations_total')!.get()).values;
  return values.find((v) => v.labels.trigger === trigger && v.labels.outcome === outcome)?.value ?? 0;
};
const reconcileRows = async (id: string) =>
  (
    await h.db.pool.query<{ status: string; source: string; reconcile_trigger: string; resource_version: string }>(
      `SELECT status, source, reconcile_trigger, resource_version FROM inbox_events
       WHERE tenant_id = $1 AND resource_id = $2 AND source = 'reconcile' ORDER BY resource_version`,
      [TENANT, id],
    )
  ).rows;

describe('push, then pull', () => {
  it('a version gap pulls the snapshot, the state catches up and the change reaches the applied topic', async () => {
    const id = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { version: 7, data: data('pulled v7') } });
    await post('prov', event(id, 1, 'created'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 1, { message: 'v1 applied' });
    await post('prov', event(id, 5, 'updated'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 7, { timeoutMs: 30_000, message: 'pulled v7 applied' });
    expect((await h.state(TENANT, id))!.data).toMatchObject({ name: 'pulled v7' });
    expect(api.requests.find((r) => r.path.includes(id))!.authorization).toBe(`Bearer ${TOKEN}`);
    expect(await reconcileRows(id)).toEqual([{ status: 'applied', source: 'reconcile', reconcile_trigger: 'gap', resource_version: '7' }]);
    await h.settle();
    const applied = await h.applied(`${TENANT}/theme/${id}`);
    expect(applied.map((a) => a.value.resource.version)).toEqual([1, 5, 7]);
    expect(await metric('gap', 'applied')).toBeGreaterThanOrEqual(1);
  });

  it('an update for a resource never seen pulls it', async () => {
    const id = freshId('thm');
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { resource: { version: 4 }, data: data('pulled v4') } });
    await post('prov', event(id, 3, 'updated'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 4, { timeoutMs: 30_000, message: 'pulled v4 applied' });
    expect((await reconcileRows(id)).map((r) => r.reconcile_trigger)).toEqual(['unseen']);
  });

  it("never pulls for a tenant the source's reconcile settings do not cover (regression: the console test saw an extra pull)", async () => {
    const id = freshId('thm');
    api.replies.set(`/api/${OTHER_TENANT}/themes/${id}`, { status: 200, body: { version: 9, data: data('must not be pulled') } });
    const unseen = { ...event(id, 3, 'updated'), tenant_id: OTHER_TENANT };
    await post('prov', unseen);
    await eventually(async () => (await h.state(OTHER_TENANT, id))?.version === 3, { timeoutMs: 30_000, message: 'v3 applied' });
    // A pull would be queued right after the commit; give it time to show up if it were.
    await sleep(1500);
    expect(api.requests.filter((r) => r.path.includes(id))).toEqual([]);
    expect((await h.state(OTHER_TENANT, id))?.version).toBe(3);
  });

  it('a quarantined anomaly pulls the provider truth', async () => {
    const id = freshId('thm');
    const eventId = freshEventId();
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { version: 2, data: data('truth v2') } });
    await post('prov', event(id, 1, 'created', 'first', eventId));
    await eventually(async () => (await h.state(TENANT, id))?.version === 1, { message: 'v1 applied' });
    await post('prov', event(id, 1, 'created', 'other content', eventId));
    await eventually(async () => (await h.state(TENANT, id))?.version === 2, { timeoutMs: 30_000, message: 'pulled v2 applied' });
    expect((await h.state(TENANT, id))!.data).toMatchObject({ name: 'truth v2' });
    expect(await h.anomalies(TENANT, eventId)).toBe(1);
    expect((await reconcileRows(id)).map((r) => r.reconcile_trigger)).toEqual(['quarantine']);
  });

  it('timeouts and 5xx are retried, then the breaker opens (bounded requests) and closes after the cooldown', async () => {
    const slow = freshId('slow');
    const bad = [freshId('bad'), freshId('bad'), freshId('bad')];
    // The counters are the file's: each is read against its value before this test.
    const failedBefore = await metric('unseen', 'failed');
    const refusedBefore = await metric('unseen', 'circuit_open');
    api.replies.set(`/flaky/${slow}`, { hang: 1000 });
    for (const id of bad) api.replies.set(`/flaky/${id}`, { status: 503, body: { error: 'down' } });
    await post('flaky', event(slow, 2, 'updated'));
    await eventually(async () => (await metric('unseen', 'failed')) > failedBefore, { timeoutMs: 30_000, message: 'slow pull failed' });
    // Two timed-out tries in that pull, two failures of three (its owed retry may have begun since).
    expect(api.count(`/flaky/${slow}`)).toBeGreaterThanOrEqual(2);
    for (const id of bad) await post('flaky', event(id, 2, 'updated'));
    // The next failed try opens the breaker, whichever pull it was (a bad one, or the slow one's
    // retry on the schedule). The worker runs two pulls at once, so one already past the breaker may
    // still send its try: at most the threshold plus one request went out, not a request per pull.
    await eventually(() => h.worker.reconcile!.reconciler.breakerState('flaky') === 'open', {
      intervalMs: 5,
      timeoutMs: 30_000,
      message: 'the breaker open',
    });
    const sent = api.count('/flaky/');
    expect(sent).toBeGreaterThanOrEqual(3);
    expect(sent).toBeLessThanOrEqual(4);
    // The pulls that come while it is open are refused without a request.
    await eventually(async () => (await metric('unseen', 'circuit_open')) > refusedBefore, {
      timeoutMs: 30_000,
      message: 'a pull refused by the open breaker',
    });
    await h.worker.reconcile!.idle();

    // The API recovers. The pulls that failed are owed (reconcile_pulls) and come back on the retry
    // schedule: while any of them still failed, its retry could reopen the breaker after the cooldown.
    for (const id of [slow, ...bad]) api.replies.set(`/flaky/${id}`, { status: 200, body: { version: 3, data: data('recovered') } });
    // The cooldown over (an owed pull's retry may already have taken the trial and closed it).
    await eventually(() => h.worker.reconcile!.reconciler.breakerState('flaky') !== 'open', {
      timeoutMs: 30_000,
      message: 'the cooldown over',
    });
    const healed = freshId('ok');
    api.replies.set(`/flaky/${healed}`, { status: 200, body: { version: 9, data: data('healed') } });
    await post('flaky', event(healed, 2, 'updated'));
    await eventually(async () => (await h.state(TENANT, healed))?.version === 9, { timeoutMs: 30_000, message: 'healed v9 applied' });
    expect(h.worker.reconcile!.reconciler.breakerState('flaky')).toBe('closed');
    // The owed pulls, refused while the breaker was open, are pulled once it has closed.
    for (const id of [slow, ...bad])
      await eventually(async () => (await h.state(TENANT, id))?.version === 3, { timeoutMs: 30_000, message: `${id} v3 applied` });
    expect(h.worker.reconcile!.reconciler.breakerState('flaky')).toBe('closed');
  });

  it('bridge reconcile: --dry-run prints what would happen and changes nothing; without it the snapshot applies', async () => {
    const id = freshId('thm');
    await post('prov', event(id, 1, 'created'));
    await eventually(async () => (await h.state(TENANT, id))?.version === 1, { message: 'v1 applied' });
    await h.settle();
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { version: 2, data: data('operator v2') } });
    const dir = mkdtempSync(path.join(tmpdir(), 'reconcile-cli-'));
    const file = path.join(dir, 'sources.json');
    writeFileSync(
      file,
      JSON.stringify({
        sources: [
          {
            id: 'prov',
            secrets: [{ id: 'k1', env: 'UNUSED_SIGNING_SECRET' }],
            tenants: [TENANT],
            reconcile: { url: `${api.url}/api/{tenant}/{type}s/{id}`, auth: { env: 'PROVIDER_TOKEN', prefix: 'Bearer ' } },
          },
        ],
      }),
    );
    const env = {
      ...bridgeEnv({ brokers: testBrokers(), databaseUrl: h.db.url, events: h.names.events, applied: h.names.applied }),
      WEBHOOK_SOURCES_FILE: file,
      PROVIDER_TOKEN: TOKEN,
    };
    const before = await h.eventsCount();
    const dry = await runBridge(['reconcile', TENANT, 'theme', id, '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('applied: would publish v2');
    expect(dry.stdout).toContain('(dry run: nothing changed)');
    expect(await h.eventsCount()).toBe(before);
    expect((await h.state(TENANT, id))!.version).toBe(1);

    const real = await runBridge(['reconcile', TENANT, 'theme', id, '--json'], env);
    expect(real.code, real.stderr).toBe(0);
    expect(real.json()).toMatchObject({ outcome: 'applied', published: true, fetched: { status: 200, version: 2 } });
    await eventually(async () => (await h.state(TENANT, id))?.version === 2, { timeoutMs: 30_000, message: 'operator v2 applied' });
    expect((await reconcileRows(id)).map((r) => r.reconcile_trigger)).toEqual(['operator']);

    const stale = await runBridge(['reconcile', TENANT, 'theme', id, '--dry-run', '--json'], env);
    expect(stale.json()).toMatchObject({ outcome: 'stale', published: false });
    const missing = await runBridge(['reconcile', TENANT, 'theme', 'thm_nowhere', '--dry-run', '--json'], env);
    expect(missing.code).toBe(0);
    expect(missing.json()).toMatchObject({ outcome: 'gone', published: false });
  });
});
