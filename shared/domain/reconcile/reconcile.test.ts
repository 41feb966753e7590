import type { Pool } from 'pg';
import { describe, expect, it } from 'vitest';
import type { ApplyResult } from '#domain/apply/index.ts';
import { parseSourcesFile, resolveReconcileSources, SourcesConfigError, type ReconcileSource } from '#domain/sources/index.ts';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import { CircuitBreaker } from './circuit-breaker.ts';
import { parseSnapshotBody, statedIdentity } from './provider-client.ts';
import { Reconciler, resourceRefProblem } from './reconciler.ts';
import { ReconcileQueue } from './reconcile-queue.ts';
import { TokenBucket } from './token-bucket.ts';
import { reconcileTriggerFor } from './triggers.ts';
import { pullRecordChange, type PullAttempt, type PullRecordChange } from './pull-records.ts';
import { expandUrlTemplate } from './url-template.ts';

describe('expandUrlTemplate', () => {
  const expand = (template: string, id: string, tenant = 't') => expandUrlTemplate(template, { tenant, type: 'theme', id });
  it('fills the placeholders, each URL-encoded as one segment', () => {
    expect(expandUrlTemplate('https://p.example/api/{tenant}/{type}s/{id}', { tenant: 't 1', type: 'theme', id: 'a/../b?x=1#y' })).toEqual({
      protocol: 'https:',
      hostname: 'p.example',
      port: 443,
      path: '/api/t%201/themes/a%2F..%2Fb%3Fx%3D1%23y',
      url: 'https://p.example/api/t%201/themes/a%2F..%2Fb%3Fx%3D1%23y',
    });
  });
  it.each([
    ['.', '%2E'],
    ['..', '%2E%2E'],
    ['...', '%2E%2E%2E'],
    ['a..b', 'a..b'],
    ['%2e%2e', '%252e%252e'],
  ])('an id %j never changes the path (sent as %s, never normalised)', (id, sent) => {
    expect(expand('https://p.example/api/{type}s/{id}?tenant={tenant}', id, '..').path).toBe(`/api/themes/${sent}?tenant=%2E%2E`);
  });
  it('keeps the port and a query-only template', () => {
    expect(expand('http://127.0.0.1:8089?id={id}', 'x')).toMatchObject({ hostname: '127.0.0.1', port: 8089, path: '/?id=x' });
  });
  it('refuses an unknown placeholder', () => {
    expect(() => expand('https://p.example/{nope}', 'x')).toThrow(/unknown placeholder/);
  });
  it('refuses http:// to anything but loopback: the bearer token would travel in clear', () => {
    expect(() => expand('http://p.example/{id}', 'x')).toThrow(/in clear/);
    expect(() => expand('http://10.0.0.1:80/{id}', 'x')).toThrow(/in clear/);
    for (const host of ['localhost', '127.0.0.1', '127.1.2.3', '[::1]']) expect(expand(`http://${host}:9/{id}`, 'x').port).toBe(9);
  });
});

describe('pullRecordChange', () => {
  const schedule = { delaysMs: [100, 200], jitter: 0 };
  it.each<[string, PullAttempt, number, PullRecordChange]>([
    ['applied resolves', { outcome: 'applied', retryable: false }, 0, { kind: 'resolved' }],
    ['stale resolves', { outcome: 'stale', retryable: false }, 1, { kind: 'resolved' }],
    [
      'gone waits for an operator',
      { outcome: 'gone', retryable: false },
      0,
      { kind: 'attempted', status: 'gone', attempts: 1, dueInMs: null, exhausted: false },
    ],
    ['gone agrees with a stored tombstone', { outcome: 'gone', retryable: false, storedDeleted: true }, 0, { kind: 'resolved' }],
    [
      'invalid is failed',
      { outcome: 'invalid', retryable: false },
      0,
      { kind: 'attempted', status: 'failed', attempts: 1, dueInMs: null, exhausted: false },
    ],
    [
      'implausible is failed',
      { outcome: 'implausible', retryable: false },
      0,
      { kind: 'attempted', status: 'failed', attempts: 1, dueInMs: null, exhausted: false },
    ],
    [
      'a refused answer is failed',
      { outcome: 'failed', retryable: false },
      0,
      { kind: 'attempted', status: 'failed', attempts: 1, dueInMs: null, exhausted: false },
    ],
    [
      'a 5xx retries at level 1',
      { outcome: 'failed', retryable: true },
      0,
      { kind: 'attempted', status: 'retrying', attempts: 1, dueInMs: 100, exhausted: false },
    ],
    [
      'then level 2',
      { outcome: 'circuit_open', retryable: true },
      1,
      { kind: 'attempted', status: 'retrying', attempts: 2, dueInMs: 200, exhausted: false },
    ],
    [
      'then gives up',
      { outcome: 'error', retryable: true },
      2,
      { kind: 'attempted', status: 'failed', attempts: 3, dueInMs: null, exhausted: true },
    ],
  ])('%s', (_, attempt, before, expected) => {
    expect(pullRecordChange(attempt, before, schedule)).toEqual(expected);
  });
});

describe('the reconcile block of a source', () => {
  const file = (reconcile: unknown) =>
    parseSourcesFile({ sources: [{ id: 's', secrets: [{ id: 'k', env: 'K' }], tenants: ['t'], reconcile }] });
  it('has defaults: 3 s timeout, 3 attempts, 5/s with bursts of 10, breaker 5 failures / 30 s, gap 1', () => {
    const r = file({ url: 'https://p.example/api/{type}s/{id}' }).sources[0]!.reconcile!;
    expect(r).toMatchObject({
      timeoutMs: 3000,
      attempts: 3,
      rateLimit: { perSecond: 5, burst: 10 },
      breaker: { failureThreshold: 5, cooldownMs: 30_000 },
      maxVersionGap: 1,
    });
  });
  it('refuses http:// but for a loopback host (tests, a sidecar)', () => {
    expect(() => file({ url: 'http://p.example/{id}' })).toThrow(/loopback/);
    expect(() => file({ url: 'http://user@p.example/{id}' })).toThrow(/loopback/);
    expect(() => file({ url: 'http://127.0.0.1.p.example/{id}' })).toThrow(/loopback/);
    for (const url of ['http://localhost:8080/{id}', 'http://127.0.0.1/{id}', 'http://[::1]:9/{id}', 'https://p.example/{id}'])
      expect(file({ url }).sources[0]!.reconcile!.url).toBe(url);
  });
  it('bounds how far a pulled version may lead (default 2^32)', () => {
    expect(file({ url: 'https://p.example/{id}' }).sources[0]!.reconcile!.maxVersionLead).toBe(2 ** 32);
  });
  it('refuses a template without {id} or with an unknown placeholder', () => {
    expect(() => file({ url: 'https://p.example/api/themes' })).toThrow(SourcesConfigError);
    expect(() => file({ url: 'https://p.example/{resource}/{id}' })).toThrow(/placeholders/);
  });
  it('reads the auth value from the environment, never the file, and says which variable is missing', () => {
    const parsed = file({ url: 'https://p.example/{id}', auth: { env: 'PROVIDER_TOKEN', prefix: 'Bearer ' } });
    expect(resolveReconcileSources(parsed, { PROVIDER_TOKEN: 'tok' })[0]!.reconcile.auth).toEqual({
      header: 'Authorization',
      value: 'Bearer tok',
    });
    expect(() => resolveReconcileSources(parsed, {})).toThrow(/PROVIDER_TOKEN is not set/);
  });
  it('needs no webhook secret (the worker resolves only the API credentials)', () => {
    expect(resolveReconcileSources(file({ url: 'https://p.example/{id}' }), {})).toHaveLength(1);
  });
});

describe('TokenBucket', () => {
  it('lets a burst through, then spaces requests at the rate', () => {
    let now = 0;
    const bucket = new TokenBucket({ perSecond: 2, burst: 2, now: () => now });
    expect([bucket.reserve(), bucket.reserve()]).toEqual([0, 0]);
    expect(bucket.reserve()).toBe(500);
    expect(bucket.reserve()).toBe(1000);
    now = 2000;
    expect(bucket.reserve()).toBe(0);
  });
});

describe('CircuitBreaker', () => {
  it('opens after the threshold, refuses during the cooldown, lets one trial through, and closes on its success', () => {
    let now = 0;
    const breaker = new CircuitBreaker({ failureThreshold: 2, cooldownMs: 1000, now: () => now });
    breaker.onFailure();
    expect(breaker.tryAcquire()).toBe(true);
    breaker.onFailure();
    expect(breaker.state).toBe('open');
    expect(breaker.tryAcquire()).toBe(false);
    now = 1000;
    expect(breaker.state).toBe('half_open');
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
    breaker.onSuccess();
    expect(breaker.state).toBe('closed');
    expect(breaker.tryAcquire()).toBe(true);
  });
  it('opens again when the trial fails', () => {
    let now = 0;
    const breaker = new CircuitBreaker({ failureThreshold: 1, cooldownMs: 1000, now: () => now });
    breaker.onFailure();
    now = 1000;
    expect(breaker.tryAcquire()).toBe(true);
    breaker.onFailure();
    expect(breaker.state).toBe('open');
    now = 1999;
    expect(breaker.tryAcquire()).toBe(false);
  });
});

describe('Reconciler.setSources', () => {
  const source = (id: string, failureThreshold = 1): ReconcileSource => ({
    id,
    tenants: ['t1'],
    resourceTypes: ['theme'],
    reconcile: {
      url: `http://127.0.0.1:9/${id}/{id}`,
      timeoutMs: 1000,
      attempts: 1,
      retryDelayMs: 0,
      rateLimit: { perSecond: 100, burst: 100 },
      breaker: { failureThreshold, cooldownMs: 60_000 },
      maxVersionGap: 1,
    },
  });
  const reconciler = (sources: ReconcileSource[]) =>
    new Reconciler({
      // An empty store: nothing stored for the resource.
      pool: { query: async () => ({ rows: [] }) } as unknown as Pool,
      sources,
      publish: async () => {},
      fetch: async () => {
        throw new BridgeError('reconcile_unavailable', 'down', { retryable: true });
      },
    });
  const pull = (r: Reconciler, sourceId: string) => r.reconcile({ tenantId: 't1', type: 'theme', id: 'x', trigger: 'gap', sourceId });

  it('adds and removes sources while running; a source whose guard settings stay keeps its open breaker', async () => {
    const r = reconciler([source('a')]);
    await expect(pull(r, 'b')).rejects.toThrow(/no reconcile settings/);
    await pull(r, 'a');
    expect(r.breakerState('a')).toBe('open');
    r.setSources([source('a'), source('b')]);
    expect(r.breakerState('a')).toBe('open');
    expect(r.breakerState('b')).toBe('closed');
    expect((await pull(r, 'b')).outcome).toBe('failed');
    // New breaker settings: a new breaker.
    r.setSources([source('a', 5)]);
    expect(r.breakerState('a')).toBe('closed');
    expect(r.breakerState('b')).toBeUndefined();
    await expect(pull(r, 'b')).rejects.toThrow(/no reconcile settings/);
  });
});

describe('parseSnapshotBody', () => {
  it('takes version and data, or resource.version', () => {
    expect(parseSnapshotBody('{"version":7,"data":{"a":1}}')).toEqual({ version: 7, data: { a: 1 }, stated: {} });
    expect(parseSnapshotBody('{"resource":{"version":8},"data":{}}').version).toBe(8);
  });
  it('leaves the version to the reconciler when the body states none, and reads the time it states', () => {
    expect(parseSnapshotBody('{"data":{},"updated_at":"2026-01-01T00:00:00Z"}')).toEqual({
      data: {},
      stated: {},
      time: { field: 'updated_at', value: '2026-01-01T00:00:00Z' },
    });
    expect(parseSnapshotBody('{"version":2,"data":{},"occurred_at":"a","updated_at":"b"}').time).toEqual({
      field: 'occurred_at',
      value: 'a',
    });
  });
  it.each(['nope', '[]', '{"version":-1,"data":{}}', '{"version":1.5,"data":{}}', '{"version":"3","data":{}}', '{"version":1}'])(
    'refuses %s as a permanent bad response',
    (body) => {
      expect(() => parseSnapshotBody(body)).toThrow(expect.objectContaining({ code: 'reconcile_bad_response', retryable: false }));
    },
  );
});

describe('statedIdentity', () => {
  it("reads the envelope's names and the top-level id and type; absent and null state nothing", () => {
    expect(statedIdentity(undefined)).toEqual({});
    expect(statedIdentity({ version: 1, data: {}, id: null })).toEqual({});
    expect(statedIdentity({ tenant_id: 't', resource: { type: 'theme', id: 'a' }, id: 'b', type: 'theme' })).toEqual({
      tenantId: 't',
      type: ['theme', 'theme'],
      id: ['a', 'b'],
    });
  });
  it('reads a number as its digits and keeps anything else as JSON (never equal to an id asked)', () => {
    expect(statedIdentity({ id: 42 })).toEqual({ id: ['42'] });
    expect(statedIdentity({ resource: { id: { x: 1 } } })).toEqual({ id: ['{"x":1}'] });
  });
});

describe('resourceRefProblem', () => {
  it("accepts the contract's ids and names each one it refuses", () => {
    expect(resourceRefProblem({ tenantId: 'tenant_acme', type: 'theme', id: 'thm_1..x' })).toBeUndefined();
    expect(resourceRefProblem({ tenantId: 'a b', type: 'Theme', id: 'x/y' })).toMatch(/^tenant id .*; resource type .*; resource id /);
    expect(resourceRefProblem({ tenantId: 't', type: 'theme', id: 'x'.repeat(101) })).toMatch(/^resource id /);
  });
});

describe('reconcileTriggerFor', () => {
  const result = (over: Partial<ApplyResult>, source = 'provider'): ApplyResult => ({
    record: { topic: 't', partition: 0, offset: '0', key: null, value: null, headers: { source } },
    outcome: 'applied',
    bodySha256: 'h',
    eventType: 'theme.updated',
    version: 5,
    storedVersion: 4,
    ...over,
  });
  it.each<[string, Partial<ApplyResult>, number, string | undefined]>([
    ['next version', {}, 1, undefined],
    ['gap above the allowance', { storedVersion: 2 }, 1, 'gap'],
    ['gap within the allowance', { storedVersion: 2 }, 3, undefined],
    ['update for an unseen resource', { storedVersion: null }, 1, 'unseen'],
    ['delete for an unseen resource', { storedVersion: null, eventType: 'theme.deleted', action: 'delete' }, 1, 'unseen'],
    ['create for an unseen resource', { storedVersion: null, eventType: 'theme.created' }, 1, undefined],
    ['quarantine', { outcome: 'quarantined' }, 1, 'quarantine'],
    ['stale', { outcome: 'stale', storedVersion: 9 }, 1, undefined],
    ['duplicate', { outcome: 'duplicate' }, 1, undefined],
  ])('%s', (_, over, gap, expected) => {
    expect(reconcileTriggerFor(result(over), gap)).toBe(expected);
  });
  it('never for a snapshot the reconciler published (no loop)', () => {
    expect(reconcileTriggerFor(result({ storedVersion: null }, 'reconcile'), 1)).toBeUndefined();
    expect(reconcileTriggerFor(result({ outcome: 'quarantined' }, 'reconcile'), 1)).toBeUndefined();
  });
});

describe('ReconcileQueue', () => {
  it('coalesces triggers for one resource, bounds concurrency and the queue', async () => {
    const releases: Array<() => void> = [];
    let running = 0;
    let peak = 0;
    const ran: string[] = [];
    const queue = new ReconcileQueue({ concurrency: 2, limit: 2, onError: () => {} });
    const job = (key: string) => ({
      key,
      run: () =>
        new Promise<void>((resolve) => {
          running += 1;
          peak = Math.max(peak, running);
          ran.push(key);
          releases.push(() => {
            running -= 1;
            resolve();
          });
        }),
    });
    expect(queue.enqueue(job('a'))).toBe('queued');
    expect(queue.enqueue(job('a'))).toBe('coalesced');
    expect(queue.enqueue(job('b'))).toBe('queued');
    expect(queue.enqueue(job('c'))).toBe('queued');
    expect(queue.enqueue(job('d'))).toBe('queued');
    expect(queue.enqueue(job('e'))).toBe('dropped');
    expect(queue.size).toEqual({ waiting: 2, running: 2 });
    while (releases.length > 0 || queue.size.running > 0) {
      releases.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await queue.idle();
    expect(ran).toEqual(['a', 'b', 'c', 'd']);
    expect(peak).toBe(2);
    expect(queue.enqueue(job('a'))).toBe('queued');
    releases.shift()?.();
    await queue.close();
    expect(queue.enqueue(job('z'))).toBe('closed');
  });
  it('reports a failing job and goes on', async () => {
    const errors: string[] = [];
    const queue = new ReconcileQueue({ concurrency: 1, limit: 10, onError: (_, key) => errors.push(key) });
    queue.enqueue({ key: 'x', run: () => Promise.reject(new Error('boom')) });
    queue.enqueue({ key: 'y', run: () => Promise.resolve() });
    await queue.idle();
    expect(errors).toEqual(['x']);
  });
});
