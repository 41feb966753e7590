import { describe, expect, it } from 'vitest';
import { eventAction, eventFingerprint, resourceKey, sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';
import { decideOutcomes, tenantScopedKey, type KnownInboxRow, type KnownState } from './decide.ts';
import type { ParsedEvent } from './types.ts';

function parsed(envelope: EventEnvelope): ParsedEvent {
  return {
    record: { topic: 't', partition: 0, offset: '0', key: null, value: null },
    envelope,
    bodySha256: `sha-${JSON.stringify(envelope)}`,
    bytes: Buffer.from(JSON.stringify(envelope)),
    deliveryAttempt: envelope.delivery_attempt,
    resourceKey: resourceKey(envelope),
    action: eventAction(envelope),
  };
}

const ev = (version: number, extra: Partial<EventEnvelope> = {}) => sampleThemeEvent({ ...extra, resource: { id: 'r1', version } });

function run(events: ParsedEvent[], inbox = new Map<string, KnownInboxRow>(), states = new Map<string, KnownState>()) {
  return decideOutcomes(events, inbox, new Map(), states).map((d) => d.outcome);
}

describe('decideOutcomes', () => {
  it('applies increasing versions and reports stale / duplicate_version against the running state', () => {
    expect(run([parsed(ev(2)), parsed(ev(1)), parsed(ev(2)), parsed(ev(5))])).toEqual(['applied', 'stale', 'duplicate_version', 'applied']);
  });

  it('marks a version gap only against a stored version', () => {
    const decisions = decideOutcomes([parsed(ev(3)), parsed(ev(4)), parsed(ev(9))], new Map(), new Map(), new Map());
    expect(decisions.map((d) => d.versionGap)).toEqual([false, false, true]);
  });

  it('a tombstone keeps its version: a lower update is stale', () => {
    expect(run([parsed(ev(50, { event_type: 'theme.deleted' })), parsed(ev(49))])).toEqual(['applied', 'stale']);
  });

  it('same event_id: the same content is a duplicate, other content is quarantined', () => {
    const e = ev(1);
    const changed = { ...e, data: { ...e.data, name: 'Changed' } };
    expect(run([parsed(e), parsed(e), parsed(changed)])).toEqual(['applied', 'duplicate', 'quarantined']);
  });

  it("a provider's redelivery (another delivery_attempt, other key order) is a duplicate, never an anomaly", () => {
    const e = ev(1, { delivery_attempt: 1 });
    const again = { ...e, delivery_attempt: 2 };
    const reordered = Object.fromEntries(Object.entries(e).reverse()) as EventEnvelope;
    expect(run([parsed(e), parsed(again), parsed(reordered)])).toEqual(['applied', 'duplicate', 'duplicate']);
  });

  it('event ids are scoped to their tenant: the same id under two tenants is two events', () => {
    const a = ev(1, { event_id: 'evt_same', tenant_id: 'tenant_a' });
    const b = ev(1, { event_id: 'evt_same', tenant_id: 'tenant_b' });
    expect(run([parsed(a), parsed(b)])).toEqual(['applied', 'applied']);
  });

  it('settles a pending inbox row (retrying) instead of calling it a duplicate', () => {
    const e = ev(1);
    const inbox = new Map([[tenantScopedKey(e.tenant_id, e.event_id), { bodySha256: parsed(e).bodySha256, status: 'retrying' }]]);
    expect(run([parsed(e), parsed(e)], inbox)).toEqual(['applied', 'duplicate']);
  });

  it('compares a stored row with other bytes by fingerprint: a redelivery of it is a duplicate, other content an anomaly', () => {
    const e = ev(1, { delivery_attempt: 1 });
    const stored = () =>
      new Map([
        [tenantScopedKey(e.tenant_id, e.event_id), { bodySha256: 'stored-sha', status: 'applied', payload: JSON.stringify(e, null, 2) }],
      ]);
    expect(run([parsed({ ...e, delivery_attempt: 3 })], stored())).toEqual(['duplicate']);
    expect(run([parsed({ ...e, resource: { ...e.resource, version: 2 } })], stored())).toEqual(['quarantined']);
    const pruned = new Map([
      [tenantScopedKey(e.tenant_id, e.event_id), { bodySha256: 'stored-sha', status: 'applied', fingerprint: eventFingerprint(e) }],
    ]);
    expect(run([parsed({ ...e, delivery_attempt: 4 })], pruned)).toEqual(['duplicate']);
    const unreadable = new Map([[tenantScopedKey(e.tenant_id, e.event_id), { bodySha256: 'stored-sha', status: 'applied', payload: '{' }]]);
    expect(run([parsed(e)], unreadable)).toEqual(['quarantined']);
  });

  it('an idempotency key repeated under a new event_id is a duplicate of the event that applied it', () => {
    const a = ev(1, { idempotency_key: 'k' });
    const b = ev(2, { idempotency_key: 'k' });
    const decisions = decideOutcomes([parsed(a), parsed(b)], new Map(), new Map(), new Map());
    expect(decisions.map((d) => [d.outcome, d.duplicateOf])).toEqual([
      ['applied', undefined],
      ['duplicate', a.event_id],
    ]);
  });

  it('a stale event does not claim its idempotency key: the corrected republish applies', () => {
    const states = new Map([[resourceKey(ev(1)), { version: 5, deleted: false }]]);
    const stale = ev(1, { idempotency_key: 'k' });
    const corrected = ev(6, { idempotency_key: 'k' });
    expect(run([parsed(stale), parsed(corrected)], new Map(), states)).toEqual(['stale', 'applied']);
  });

  it('idempotency keys are scoped to their tenant', () => {
    const a = ev(1, { idempotency_key: 'k', tenant_id: 'tenant_a' });
    const b = ev(1, { idempotency_key: 'k', tenant_id: 'tenant_b' });
    expect(run([parsed(a), parsed(b)])).toEqual(['applied', 'applied']);
  });
});
