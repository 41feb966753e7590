import { describe, expect, it } from 'vitest';
import {
  eventAction,
  eventFingerprint,
  resourceKey,
  sampleThemeEvent,
  type EventEnvelope,
  type ReceivedEnvelope,
} from '#domain/contract/index.ts';
import { occurredAtMicros } from '#domain/contract/occurred-at.ts';
import { decideOutcomes, tenantScopedKey, type KnownInboxRow, type KnownState } from './decide.ts';
import type { ParsedEvent } from './types.ts';

function parsed(envelope: ReceivedEnvelope, orderedBy: ParsedEvent['orderedBy'] = 'version'): ParsedEvent {
  return {
    orderedBy,
    ...(orderedBy === 'occurred_at' ? { occurredAtMicros: occurredAtMicros(envelope.occurred_at) } : {}),
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

/** An event of a source ordering by occurred_at, without a version unless one is given. */
function timed(occurredAt: string, extra: Partial<EventEnvelope> = {}, version?: number): ParsedEvent {
  const envelope: ReceivedEnvelope = sampleThemeEvent({ ...extra, occurred_at: occurredAt, resource: { id: 'r1', version: version ?? 0 } });
  if (version === undefined) delete envelope.resource.version;
  return parsed(envelope, 'occurred_at');
}

describe('decideOutcomes, ordered by occurred_at', () => {
  const T = (s: number, fraction = '') => `2026-06-16T10:15:${String(s).padStart(2, '0')}${fraction}Z`;
  const decide = (events: ParsedEvent[], states = new Map<string, KnownState>()) =>
    decideOutcomes(events, new Map(), new Map(), states).map((d) => [d.outcome, d.reason]);

  it.each([
    // [case, stored occurred_at or none, incoming, outcome, reason]
    ['no state: applies', undefined, T(30), 'applied', undefined],
    ['later: applies', T(30), T(31), 'applied', undefined],
    ['a microsecond later: applies', T(30, '.000001'), T(30, '.000002'), 'applied', undefined],
    ['earlier: stale', T(30), T(29), 'stale', 'stored occurred_at 2026-06-16T10:15:30.000000Z'],
    [
      'the same instant: stale, never duplicate_version',
      T(30),
      T(30),
      'stale',
      'stored occurred_at 2026-06-16T10:15:30.000000Z (same instant)',
    ],
    [
      'the same instant written with an offset: stale',
      T(30),
      '2026-06-16T17:15:30+07:00',
      'stale',
      'stored occurred_at 2026-06-16T10:15:30.000000Z (same instant)',
    ],
    [
      'apart below a microsecond: a tie',
      T(30, '.0000001'),
      T(30, '.0000009'),
      'stale',
      'stored occurred_at 2026-06-16T10:15:30.000000Z (same instant)',
    ],
  ] as const)('%s', (_case, storedAt, incoming, outcome, reason) => {
    const states = new Map<string, KnownState>();
    if (storedAt !== undefined)
      states.set(resourceKey(timed(storedAt).envelope), { version: null, deleted: false, occurredAtMicros: occurredAtMicros(storedAt) });
    expect(decide([timed(incoming)], states)).toEqual([[outcome, reason]]);
  });

  it('a delete leaves a tombstone at its time: an older update never resurrects, a newer one does', () => {
    const deleted = timed(T(40), { event_type: 'theme.deleted', data: undefined });
    expect(decide([timed(T(30)), deleted, timed(T(35)), timed(T(40)), timed(T(41))]).map(([o]) => o)).toEqual([
      'applied',
      'applied',
      'stale',
      'stale',
      'applied',
    ]);
  });

  it('orders by occurred_at even when the event carries a version: the version is carried, not compared', () => {
    const states = new Map<string, KnownState>();
    expect(decide([timed(T(30), {}, 9), timed(T(31), {}, 1), timed(T(29), {}, 50)], states).map(([o]) => o)).toEqual([
      'applied',
      'applied',
      'stale',
    ]);
    expect(states.get(resourceKey(timed(T(0)).envelope))).toEqual({
      version: 1,
      deleted: false,
      occurredAtMicros: occurredAtMicros(T(31)),
    });
  });

  it('the same event again is a duplicate by event id, before any time is compared', () => {
    const e = timed(T(30), { event_id: 'evt_same' });
    expect(decide([e, timed(T(30), { event_id: 'evt_same' })]).map(([o]) => o)).toEqual(['applied', 'duplicate']);
  });

  it('switching a type between orderings: a row without the incoming key takes the event', () => {
    const key = resourceKey(timed(T(0)).envelope);
    // Ordered by version until now (no stored occurred_at): the first event by time applies.
    const byVersion = new Map<string, KnownState>([[key, { version: 7, deleted: false, occurredAtMicros: null }]]);
    expect(decide([timed(T(1))], byVersion).map(([o]) => o)).toEqual(['applied']);
    // Ordered by time without a version: the first event by version applies; then versions compare.
    const byTime = new Map<string, KnownState>([[key, { version: null, deleted: false, occurredAtMicros: occurredAtMicros(T(30)) }]]);
    expect(decide([parsed(ev(3)), parsed(ev(2)), parsed(ev(3))], byTime).map(([o]) => o)).toEqual([
      'applied',
      'stale',
      'duplicate_version',
    ]);
  });

  it('reports no version gap, whatever the versions carried', () => {
    const states = new Map<string, KnownState>();
    const decisions = decideOutcomes([timed(T(1), {}, 1), timed(T(2), {}, 90)], new Map(), new Map(), states);
    expect(decisions.map((d) => d.versionGap)).toEqual([false, false]);
  });
});
