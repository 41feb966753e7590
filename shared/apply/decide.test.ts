import { describe, expect, it } from 'vitest';
import { eventAction, resourceKey, sampleThemeEvent, type EventEnvelope } from '../contract/index.ts';
import { decideOutcomes, type KnownInboxRow, type KnownState } from './decide.ts';
import type { ParsedEvent } from './types.ts';

function parsed(envelope: EventEnvelope, sha = `sha-${envelope.event_id}`): ParsedEvent {
  return {
    record: { topic: 't', partition: 0, offset: '0', key: null, value: null },
    envelope,
    bodySha256: sha,
    bytes: Buffer.from(JSON.stringify(envelope)),
    resourceKey: resourceKey(envelope),
    action: eventAction(envelope),
  };
}

const ev = (version: number, extra: Partial<EventEnvelope> = {}) =>
  sampleThemeEvent({ ...extra, resource: { id: 'r1', version } });

function run(events: ParsedEvent[], inbox = new Map<string, KnownInboxRow>(), states = new Map<string, KnownState>()) {
  return decideOutcomes(events, inbox, new Map(), states).map((d) => d.outcome);
}

describe('decideOutcomes', () => {
  it('applies increasing versions and reports stale / duplicate_version against the running state', () => {
    expect(run([parsed(ev(2)), parsed(ev(1)), parsed(ev(2)), parsed(ev(5))])).toEqual([
      'applied',
      'stale',
      'duplicate_version',
      'applied',
    ]);
  });

  it('marks a version gap only against a stored version', () => {
    const decisions = decideOutcomes([parsed(ev(3)), parsed(ev(4)), parsed(ev(9))], new Map(), new Map(), new Map());
    expect(decisions.map((d) => d.versionGap)).toEqual([false, false, true]);
  });

  it('a tombstone keeps its version: a lower update is stale', () => {
    expect(run([parsed(ev(50, { event_type: 'theme.deleted' })), parsed(ev(49))])).toEqual(['applied', 'stale']);
  });

  it('same event_id: same body is a duplicate, another body is quarantined', () => {
    const e = ev(1);
    expect(run([parsed(e), parsed(e), parsed(e, 'other')])).toEqual(['applied', 'duplicate', 'quarantined']);
  });

  it('settles a pending inbox row (retrying) instead of calling it a duplicate', () => {
    const e = ev(1);
    const inbox = new Map([[e.event_id, { bodySha256: `sha-${e.event_id}`, status: 'retrying' }]]);
    expect(run([parsed(e), parsed(e)], inbox)).toEqual(['applied', 'duplicate']);
  });

  it('an idempotency key repeated under a new event_id is a duplicate of the first', () => {
    const a = ev(1, { idempotency_key: 'k' });
    const b = ev(2, { idempotency_key: 'k' });
    const decisions = decideOutcomes([parsed(a), parsed(b)], new Map(), new Map(), new Map());
    expect(decisions.map((d) => [d.outcome, d.duplicateOf])).toEqual([
      ['applied', undefined],
      ['duplicate', a.event_id],
    ]);
  });
});
