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
    const states = new Map<string, KnownState>([[resourceKey(ev(1)), { version: 5, deleted: false, orderedBy: 'version' }]]);
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
      states.set(resourceKey(timed(storedAt).envelope), {
        version: null,
        deleted: false,
        occurredAtMicros: occurredAtMicros(storedAt),
        orderedBy: 'occurred_at',
      });
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
      orderedBy: 'occurred_at',
    });
  });

  it('the same event again is a duplicate by event id, before any time is compared', () => {
    const e = timed(T(30), { event_id: 'evt_same' });
    expect(decide([e, timed(T(30), { event_id: 'evt_same' })]).map(([o]) => o)).toEqual(['applied', 'duplicate']);
  });

  it('reports no version gap, whatever the versions carried', () => {
    const states = new Map<string, KnownState>();
    const decisions = decideOutcomes([timed(T(1), {}, 1), timed(T(2), {}, 90)], new Map(), new Map(), states);
    expect(decisions.map((d) => d.versionGap)).toEqual([false, false]);
  });
});

describe('decideOutcomes: one ordering per resource', () => {
  const T = (s: number) => `2026-06-16T10:15:${String(s).padStart(2, '0')}Z`;
  const key = resourceKey(ev(1));
  const byVersion = (version: number | null, occurredAt?: string): KnownState => ({
    version,
    deleted: false,
    occurredAtMicros: occurredAt === undefined ? null : occurredAtMicros(occurredAt),
    orderedBy: 'version',
  });
  const byTime = (occurredAt: string | null, version: number | null = null): KnownState => ({
    version,
    deleted: false,
    occurredAtMicros: occurredAt === null ? null : occurredAtMicros(occurredAt),
    orderedBy: 'occurred_at',
  });
  const decide = (events: ParsedEvent[], stored: KnownState) => {
    const states = new Map([[key, stored]]);
    const decisions = decideOutcomes(events, new Map(), new Map(), states);
    return { decisions: decisions.map((d) => [d.outcome, d.reason, d.writeInbox]), state: states.get(key) };
  };
  const mismatch = (event: string, resource: string) => [
    'ordering_mismatch',
    `event ordered by ${event}, resource ordered by ${resource}`,
    false,
  ];

  it.each([
    // [case, stored row, incoming, decision]
    ['a version event on a time-ordered row without a version', byTime(T(30)), parsed(ev(3)), mismatch('version', 'occurred_at')],
    ['a version event above the version a time-ordered row carries', byTime(T(30), 2), parsed(ev(9)), mismatch('version', 'occurred_at')],
    ['a time event on a version-ordered row', byVersion(7), timed(T(59)), mismatch('occurred_at', 'version')],
    [
      'a time event later than the time a version-ordered row keeps',
      byVersion(7, T(1)),
      timed(T(59), {}, 8),
      mismatch('occurred_at', 'version'),
    ],
    ['a version event on a version row: compared by version', byVersion(7), parsed(ev(8)), ['applied', undefined, true]],
    [
      'a time event on a time row: compared by time',
      byTime(T(30)),
      timed(T(29)),
      ['stale', 'stored occurred_at 2026-06-16T10:15:30.000000Z', true],
    ],
    [
      'a row switched to version without a version: its first versioned event applies',
      byVersion(null, T(30)),
      parsed(ev(1)),
      ['applied', undefined, true],
    ],
    [
      'a row switched to occurred_at without a known time: its first timed event applies',
      byTime(null, 4),
      timed(T(1)),
      ['applied', undefined, true],
    ],
  ] as const)('%s', (_case, stored, incoming, decision) => {
    expect(decide([incoming], stored).decisions).toEqual([decision]);
  });

  it('a mismatched event leaves the stored state as it was, and later events of the right ordering decide against it', () => {
    const { decisions, state } = decide([parsed(ev(50)), timed(T(29)), timed(T(31)), parsed(ev(60))], byTime(T(30)));
    expect(decisions.map(([o]) => o)).toEqual(['ordering_mismatch', 'stale', 'applied', 'ordering_mismatch']);
    expect(state).toEqual(byTime(T(31)));
  });

  it('a repeat of an applied event is a duplicate, whatever its ordering: the event id decides first', () => {
    const e = ev(3);
    const inbox = new Map<string, KnownInboxRow>([
      [tenantScopedKey(e.tenant_id, e.event_id), { bodySha256: parsed(e).bodySha256, status: 'applied', envelope: e }],
    ]);
    const decisions = decideOutcomes([parsed(e)], inbox, new Map(), new Map([[key, byTime(T(30))]]));
    expect(decisions.map((d) => d.outcome)).toEqual(['duplicate']);
  });

  it('a dead-lettered mismatch (its inbox row pending) is decided again on replay: mismatched still, or applied once the row matches', () => {
    const e = ev(3);
    const pending = () =>
      new Map<string, KnownInboxRow>([
        [tenantScopedKey(e.tenant_id, e.event_id), { bodySha256: parsed(e).bodySha256, status: 'dead_lettered', envelope: e }],
      ]);
    const replay = (stored: KnownState) => decideOutcomes([parsed(e)], pending(), new Map(), new Map([[key, stored]]));
    expect(replay(byTime(T(30))).map((d) => [d.outcome, d.writeInbox])).toEqual([['ordering_mismatch', false]]);
    expect(replay(byVersion(2, T(30))).map((d) => [d.outcome, d.writeInbox])).toEqual([['applied', true]]);
  });

  it('an unknown resource takes the first event of either ordering, and lives by it', () => {
    const states = new Map<string, KnownState>();
    const decisions = decideOutcomes([timed(T(30)), parsed(ev(5))], new Map(), new Map(), states);
    expect(decisions.map((d) => d.outcome)).toEqual(['applied', 'ordering_mismatch']);
    expect(states.get(key)?.orderedBy).toBe('occurred_at');
  });
});
