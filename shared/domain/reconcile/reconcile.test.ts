import { describe, expect, it } from 'vitest';
import type { ApplyResult } from '#domain/apply/index.ts';
import { parseSourcesFile, resolveReconcileSources, SourcesConfigError } from '#domain/sources/index.ts';
import { CircuitBreaker } from './circuit-breaker.ts';
import { parseSnapshotBody } from './provider-client.ts';
import { ReconcileQueue } from './reconcile-queue.ts';
import { TokenBucket } from './token-bucket.ts';
import { reconcileTriggerFor } from './triggers.ts';
import { expandUrlTemplate } from './url-template.ts';

describe('expandUrlTemplate', () => {
  it('fills the placeholders, each URL-encoded as one segment', () => {
    expect(expandUrlTemplate('https://p.example/api/{tenant}/{type}s/{id}', { tenant: 't 1', type: 'theme', id: 'a/../b?x=1#y' })).toBe(
      'https://p.example/api/t%201/themes/a%2F..%2Fb%3Fx%3D1%23y',
    );
  });
  it('refuses an unknown placeholder', () => {
    expect(() => expandUrlTemplate('https://p.example/{nope}', { tenant: 't', type: 'theme', id: 'x' })).toThrow(/unknown placeholder/);
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

describe('parseSnapshotBody', () => {
  it('takes version and data, or resource.version', () => {
    expect(parseSnapshotBody('{"version":7,"data":{"a":1}}')).toEqual({ version: 7, data: { a: 1 } });
    expect(parseSnapshotBody('{"resource":{"version":8},"data":{}}').version).toBe(8);
  });
  it.each(['nope', '[]', '{"data":{}}', '{"version":1.5,"data":{}}', '{"version":1}'])('refuses %s as a permanent bad response', (body) => {
    expect(() => parseSnapshotBody(body)).toThrow(expect.objectContaining({ code: 'reconcile_bad_response', retryable: false }));
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
