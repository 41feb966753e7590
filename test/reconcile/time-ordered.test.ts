// A pull on a resource type ordered by occurred_at compares times, not versions: the provider's
// answer states its time, an answer not after the stored time is stale, one too far ahead of the
// clock is implausible, and what is sent carries that time and the `ordered-by: occurred_at` header.
// Real ingress, worker, broker and Postgres; the provider's API is a real HTTP server; operator
// pulls run `bridge reconcile` as a subprocess.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { EVENT_HEADERS } from '#domain/contract/event-headers.ts';
import { freshEventId, freshId, hmacSource, SECRET_A, useHarness } from '../kit/harness.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { readTopic, testBrokers } from '../kit/kafka.ts';
import { eventually } from '../kit/eventually.ts';
import { useProviderApi, reconcileSource } from '../kit/provider-api.ts';

const TENANT = 'tenant_timed';
const data = (name: string) => ({ ...sampleThemeEvent().data, name });
const at = (secondsFromNow: number) => new Date(Date.now() + secondsFromNow * 1000).toISOString();

const api = useProviderApi();
const h = useHarness(
  () => {
    const reconcile = { ...reconcileSource('timed', [TENANT], `${api.url}/api/{tenant}/{type}s/{id}`), occurredAtTypes: ['theme'] };
    return {
      sources: [{ ...hmacSource('timed', SECRET_A, [TENANT]), occurredAtTypes: ['theme'] }],
      worker: { reconcile: { concurrency: 2, queueLimit: 100, sources: [reconcile] } },
    };
  },
  { timeoutMs: 120_000 },
);
let env: Record<string, string>;

beforeAll(() => {
  const sourcesFile = path.join(mkdtempSync(path.join(tmpdir(), 'time-ordered-')), 'sources.json');
  writeFileSync(
    sourcesFile,
    JSON.stringify({
      sources: [
        {
          id: 'timed',
          secrets: [{ id: 'k1', env: 'UNUSED_SIGNING_SECRET' }],
          tenants: [TENANT],
          ordering: 'occurred_at',
          reconcile: { url: `${api.url}/api/{tenant}/{type}s/{id}`, attempts: 1 },
        },
      ],
    }),
  );
  env = {
    ...bridgeEnv({ brokers: testBrokers(), databaseUrl: h.db.url, events: h.names.events, applied: h.names.applied }),
    WEBHOOK_SOURCES_FILE: sourcesFile,
  };
});

/** A pushed update ordered by its occurred_at, without a version (the time-ordered contract). */
const push = async (id: string, occurredAt: string, name: string) => {
  const event = {
    ...sampleThemeEvent({ tenant_id: TENANT, event_type: 'theme.updated', occurred_at: occurredAt, data: data(name) }),
    event_id: freshEventId(),
    resource: { type: 'theme', id },
  };
  expect((await h.post('timed', JSON.stringify(event))).status).toBe(202);
  return event.event_id;
};
const row = async (id: string) =>
  (
    await h.db.pool.query<{ name: string; version: string | null; last_occurred_at: Date | null; ordered_by: string }>(
      `SELECT data->>'name' AS name, version, last_occurred_at, ordered_by FROM resource_state
       WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`,
      [TENANT, id],
    )
  ).rows[0];
const inbox = async (eventId: string) =>
  (await h.db.pool.query<{ status: string }>('SELECT status FROM inbox_events WHERE tenant_id = $1 AND event_id = $2', [TENANT, eventId]))
    .rows[0]?.status;
const reconcile = (id: string) => runBridge(['reconcile', TENANT, 'theme', id, '--json'], env);
const failedReport = (run: { stderr: string }) =>
  (JSON.parse(run.stderr) as { details: { outcome: string; published: boolean; reason: string } }).details;

describe('a pull on a type ordered by occurred_at', () => {
  it('is stale when the answer is not after the stored time, whatever its version: the newer pushed state stays', async () => {
    const id = freshId('thm');
    const pushedAt = at(-10);
    await push(id, pushedAt, 'pushed, newer');
    await eventually(async () => (await row(id))?.name === 'pushed, newer', { message: 'the push applied' });
    // The API lags: its copy is older than the push, at a version (the provider's own counter).
    api.replies.set(`/api/${TENANT}/themes/${id}`, {
      status: 200,
      body: { version: 5, occurred_at: at(-60), data: data('pulled, older') },
    });
    const before = await h.eventsCount();
    const run = await reconcile(id);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.json()).toMatchObject({ outcome: 'stale', published: false });
    expect(await h.eventsCount()).toBe(before);
    await h.settle();
    const stored = (await row(id))!;
    expect(stored.name).toBe('pushed, newer');
    expect(stored.last_occurred_at!.toISOString()).toBe(pushedAt);
  });

  it('applies an answer after the stored time, carrying that time as occurred_at and ordered-by: a late push before it is stale', async () => {
    const id = freshId('thm');
    await push(id, at(-30), 'pushed');
    await eventually(async () => (await row(id))?.name === 'pushed', { message: 'the push applied' });
    const pulledAt = at(-5);
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { updated_at: pulledAt, data: data('pulled, newer') } });
    const run = await reconcile(id);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.json()).toMatchObject({ outcome: 'applied', published: true, event: { occurred_at: pulledAt } });
    await eventually(async () => (await row(id))?.name === 'pulled, newer', { timeoutMs: 30_000, message: 'the pull applied' });
    expect((await row(id))!.last_occurred_at!.toISOString()).toBe(pulledAt);
    const records = (await readTopic(h.kafka, h.names.events)).filter((r) => r.key === `${TENANT}/theme/${id}`);
    const pulled = records.find((r) => r.headers[EVENT_HEADERS.source] === 'reconcile')!;
    expect(pulled.headers[EVENT_HEADERS.orderedBy]).toBe('occurred_at');
    const late = await push(id, at(-20), 'late push');
    await eventually(async () => (await inbox(late)) === 'stale', { timeoutMs: 30_000, message: 'the late push stale' });
    expect((await row(id))!.name).toBe('pulled, newer');
  });

  it('with no state row, orders by the source: the pulled time becomes the order, and an older push is stale', async () => {
    const id = freshId('thm');
    const pulledAt = at(-5);
    api.replies.set(`/api/${TENANT}/themes/${id}`, {
      status: 200,
      body: { occurred_at: pulledAt, version: 3, data: data('pulled first') },
    });
    const run = await reconcile(id);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    await eventually(async () => (await row(id))?.name === 'pulled first', { timeoutMs: 30_000, message: 'the pull applied' });
    expect(await row(id)).toMatchObject({ ordered_by: 'occurred_at', last_occurred_at: new Date(pulledAt) });
    const older = await push(id, at(-50), 'older push');
    await eventually(async () => (await inbox(older)) === 'stale', { timeoutMs: 30_000, message: 'the older push stale' });
  });

  it("a quarantine's pull compares times too: an older answer leaves the newer pushed state", async () => {
    const id = freshId('thm');
    const eventId = freshEventId();
    const first = {
      ...sampleThemeEvent({ tenant_id: TENANT, event_type: 'theme.updated', occurred_at: at(-10), data: data('pushed, newer') }),
      event_id: eventId,
      resource: { type: 'theme', id },
    };
    expect((await h.post('timed', JSON.stringify(first))).status).toBe(202);
    await eventually(async () => (await row(id))?.name === 'pushed, newer', { message: 'the push applied' });
    api.replies.set(`/api/${TENANT}/themes/${id}`, {
      status: 200,
      body: { version: 7, occurred_at: at(-90), data: data('pulled, older') },
    });
    const asked = api.requests.filter((r) => r.path.endsWith(`/${id}`)).length;
    // The same event id with other content: quarantined, and the worker pulls the provider's truth.
    expect((await h.post('timed', JSON.stringify({ ...first, data: data('other content') }))).status).toBe(202);
    await eventually(async () => api.requests.filter((r) => r.path.endsWith(`/${id}`)).length > asked, {
      timeoutMs: 30_000,
      message: 'the quarantine pulled',
    });
    await eventually(async () => (await h.db.pool.query('SELECT 1 FROM reconcile_pulls WHERE resource_id = $1', [id])).rowCount === 0, {
      timeoutMs: 30_000,
      message: "the quarantine's pull answered (stale)",
    });
    await h.worker.reconcile!.idle();
    await h.settle();
    expect((await row(id))!.name).toBe('pushed, newer');
    // Stale, so nothing sent: no snapshot on the events topic.
    const sent = (await readTopic(h.kafka, h.names.events)).filter(
      (r) => r.key === `${TENANT}/theme/${id}` && r.headers[EVENT_HEADERS.source] === 'reconcile',
    );
    expect(sent).toEqual([]);
    // The DLQ holds the quarantined event only (no pulled snapshot refused for its ordering).
    expect((await h.dlq(`${TENANT}/theme/${id}`)).map((r) => r.headers['dlq-reason'])).toEqual(['quarantined']);
  });

  it('refuses an answer that states no time (invalid) and one too far ahead of the clock (implausible): nothing sent', async () => {
    const id = freshId('thm');
    await push(id, at(-30), 'pushed');
    await eventually(async () => (await row(id))?.name === 'pushed', { message: 'the push applied' });
    const before = await h.eventsCount();
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { version: 9, data: data('no time') } });
    const timeless = await reconcile(id);
    expect(timeless.code, timeless.stdout + timeless.stderr).toBe(1);
    expect(failedReport(timeless)).toMatchObject({ outcome: 'invalid', published: false });
    expect(failedReport(timeless).reason).toMatch(/occurred_at/);
    api.replies.set(`/api/${TENANT}/themes/${id}`, { status: 200, body: { occurred_at: '2062-01-01T00:00:00Z', data: data('from 2062') } });
    const ahead = await reconcile(id);
    expect(ahead.code, ahead.stdout + ahead.stderr).toBe(1);
    expect(failedReport(ahead)).toMatchObject({ outcome: 'implausible', published: false });
    expect(failedReport(ahead).reason).toMatch(/300 s/);
    expect(await h.eventsCount()).toBe(before);
    expect((await row(id))!.name).toBe('pushed');
  });
});
