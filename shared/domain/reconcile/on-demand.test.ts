import type { Pool } from 'pg';
import { describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import type { ReconcileSource } from '#domain/sources/index.ts';
import { isNotConfigured, reconcileOnDemand, reconcileSourcesFor, type OnDemandOptions } from './on-demand.ts';
import type { EventsRecord } from './reconciler.ts';

const source: ReconcileSource = {
  id: 'prov',
  tenants: ['t1'],
  resourceTypes: ['theme'],
  reconcile: {
    url: 'http://p.example/{id}',
    timeoutMs: 1000,
    attempts: 1,
    retryDelayMs: 0,
    rateLimit: { perSecond: 100, burst: 100 },
    breaker: { failureThreshold: 5, cooldownMs: 1000 },
    maxVersionGap: 1,
  },
};

function options() {
  const sent: EventsRecord[] = [];
  let opened = 0;
  let closed = 0;
  const opts: OnDemandOptions = {
    // An empty store: nothing stored for the resource.
    pool: { query: async () => ({ rows: [] }) } as unknown as Pool,
    sources: [source],
    openPublisher: () => {
      opened += 1;
      return { publish: async (r) => void sent.push(r), close: async () => void (closed += 1) };
    },
    fetch: async () => ({ kind: 'snapshot', status: 200, url: 'http://p.example/x', version: 2, data: sampleThemeEvent().data! }),
  };
  return { opts, sent, counts: () => ({ opened, closed }) };
}

describe('reconcileOnDemand', () => {
  it('a dry run decides and opens no publisher', async () => {
    const { opts, sent, counts } = options();
    const report = await reconcileOnDemand(opts, { tenantId: 't1', type: 'theme', id: 'x', dryRun: true });
    expect(report).toMatchObject({ outcome: 'applied', trigger: 'operator', published: false });
    expect(report.event?.resource.version).toBe(2);
    expect(sent).toEqual([]);
    expect(counts()).toEqual({ opened: 0, closed: 0 });
  });

  it('publishes with trigger operator, then closes the publisher', async () => {
    const { opts, sent, counts } = options();
    const report = await reconcileOnDemand(opts, { tenantId: 't1', type: 'theme', id: 'x', dryRun: false });
    expect(report).toMatchObject({ outcome: 'applied', trigger: 'operator', published: true });
    expect(sent).toHaveLength(1);
    expect(Object.values(sent[0]!.headers)).toContain('operator');
    expect(counts()).toEqual({ opened: 1, closed: 1 });
  });

  it('says when no source with reconcile owns the tenant and type', async () => {
    const { opts } = options();
    expect(reconcileSourcesFor(opts.sources, 't1', 'theme').map((s) => s.id)).toEqual(['prov']);
    expect(reconcileSourcesFor(opts.sources, 't2', 'theme')).toEqual([]);
    const error = await reconcileOnDemand(opts, { tenantId: 't2', type: 'theme', id: 'x', dryRun: true }).catch((e: unknown) => e);
    expect(isNotConfigured(error)).toBe(true);
  });
});
