import { describe, expect, it } from 'vitest';
import { contractExampleEvent, eventFingerprint, parseEvent } from '#domain/contract/index.ts';
import { sameEventContent } from '#domain/apply/decide.ts';
import { bodyFingerprint } from './pruner.ts';
import { SETTLED_INBOX_STATUSES } from '#domain/store/retention.ts';
import { PENDING_INBOX_STATUSES } from '#domain/apply/index.ts';

describe('bodyFingerprint (kept when a body is pruned)', () => {
  const event = contractExampleEvent();
  const body = JSON.stringify(event);

  it('is eventFingerprint of the parsed body', () => {
    const parsed = parseEvent(Buffer.from(body));
    expect(parsed.ok).toBe(true);
    expect(bodyFingerprint(body)).toBe(eventFingerprint((parsed as { envelope: typeof event }).envelope));
  });

  it('is the same for a redelivery with another delivery_attempt, whitespace or key order', () => {
    const { resource, ...rest } = { ...event, delivery_attempt: 4 };
    expect(bodyFingerprint(JSON.stringify({ resource, ...rest }, null, 2))).toBe(bodyFingerprint(body));
  });

  it('differs when the content differs', () => {
    expect(bodyFingerprint(JSON.stringify({ ...event, data: { ...event.data, name: 'Other' } }))).not.toBe(bodyFingerprint(body));
  });

  it.each([
    ['not JSON', 'not json {'],
    ['a JSON array', '[1,2]'],
    ['a JSON string', '"evt_1"'],
  ])('is null for %s (the row then counts as unknown content)', (_what, text) => {
    expect(bodyFingerprint(text)).toBeNull();
  });

  it("is kept for a body an earlier contract accepted and today's refuses, and matches its redelivery", () => {
    // Attempts counted from 0: today's envelope refuses it, its redelivery (attempt 2) parses.
    const earlier = JSON.stringify({ ...event, delivery_attempt: 0 });
    expect(parseEvent(Buffer.from(earlier)).ok).toBe(false);
    const redelivery = parseEvent(Buffer.from(JSON.stringify({ ...event, delivery_attempt: 2 }, null, 1)));
    if (!redelivery.ok) throw new Error('sample must parse');
    expect(bodyFingerprint(earlier)).toBe(eventFingerprint(redelivery.envelope));
    const parsed = { envelope: redelivery.envelope, bodySha256: redelivery.bodySha256 } as Parameters<typeof sameEventContent>[1];
    // Pruned (the fingerprint kept) or not yet (the body kept): the same event either way.
    expect(sameEventContent({ bodySha256: 'x', status: 'applied', fingerprint: bodyFingerprint(earlier)! }, parsed)).toBe(true);
    expect(sameEventContent({ bodySha256: 'x', status: 'applied', payload: earlier }, parsed)).toBe(true);
    const other = JSON.stringify({ ...event, delivery_attempt: 0, data: { ...event.data, name: 'Other' } });
    expect(sameEventContent({ bodySha256: 'x', status: 'applied', payload: other }, parsed)).toBe(false);
  });

  it('is what deduplication compares a later redelivery with, once the body is gone', () => {
    const redelivery = parseEvent(Buffer.from(JSON.stringify({ ...event, delivery_attempt: 2 }, null, 1)));
    if (!redelivery.ok) throw new Error('sample must parse');
    const parsed = { envelope: redelivery.envelope, bodySha256: redelivery.bodySha256 } as Parameters<typeof sameEventContent>[1];
    const pruned = { bodySha256: 'sha of the original bytes', status: 'applied', fingerprint: bodyFingerprint(body)! };
    expect(sameEventContent(pruned, parsed)).toBe(true);
    expect(sameEventContent({ bodySha256: 'x', status: 'applied' }, parsed)).toBe(false); // no body, no fingerprint
  });

  it('never touches a row a failure path left pending', () => {
    for (const status of SETTLED_INBOX_STATUSES) expect(PENDING_INBOX_STATUSES.has(status)).toBe(false);
    expect(SETTLED_INBOX_STATUSES).not.toContain('quarantined');
  });
});
