import { describe, expect, it } from 'vitest';
import {
  body,
  describeAnswer,
  freshEventId,
  freshId,
  hmacSource,
  providerHeaders,
  resourceKeyOf,
  sampleEvent,
  SECRET_A,
  SECRET_B,
  useHarness,
} from '../kit/harness.ts';
import { eventually } from '../kit/eventually.ts';

const TENANT_A = 'tenant_a';
const TENANT_B = 'tenant_b';
const T = 'tenant_idem';
// Known before the worker starts: the fault rule names the resource.
const DEAD_LETTERED_ID = freshId('dlq');

describe('contract: tenants and idempotency keys as providers use them', () => {
  const h = useHarness({
    sources: [hmacSource('source-a', SECRET_A, [TENANT_A, T]), hmacSource('source-b', SECRET_B, [TENANT_B])],
    // One attempt fails with a check-constraint violation (23514): dead-lettered at once, then the rule is spent.
    faults: [`permanent:${T}/theme/${DEAD_LETTERED_ID}:1`],
  });

  it('keeps the same event_id from two sources for two tenants apart: both applied', async () => {
    const eventId = freshEventId();
    const a = sampleEvent(TENANT_A, freshId('thm_a'), 1, { event_id: eventId });
    const b = sampleEvent(TENANT_B, freshId('thm_b'), 1, { event_id: eventId });
    const answerA = await h.post('source-a', body(a), { headers: providerHeaders(a) });
    expect(answerA.status, describeAnswer(answerA)).toBe(202);
    // The first is applied before the second arrives, so the second meets the first's inbox row.
    await h.settle();
    const answerB = await h.post('source-b', body(b), { headers: providerHeaders(b) });
    expect(answerB.status, describeAnswer(answerB)).toBe(202);
    await h.settle();

    const dead = [...(await h.dlq(resourceKeyOf(a))), ...(await h.dlq(resourceKeyOf(b)))];
    expect(dead.map((r) => `${r.key} ${r.headers['dlq-reason']}`)).toEqual([]);
    expect(await h.anomalies(TENANT_B, eventId)).toBe(0);
    expect(await h.inbox(TENANT_A, eventId)).toMatchObject({ status: 'applied' });
    expect(await h.inbox(TENANT_B, eventId)).toMatchObject({ status: 'applied' });
    expect(await h.state(TENANT_A, a.resource.id)).toMatchObject({ version: 1, last_event_id: eventId });
    expect(await h.state(TENANT_B, b.resource.id)).toMatchObject({ version: 1, last_event_id: eventId });
    expect((await h.applied(resourceKeyOf(a))).map((r) => r.value.tenant_id)).toEqual([TENANT_A]);
    expect((await h.applied(resourceKeyOf(b))).map((r) => r.value.tenant_id)).toEqual([TENANT_B]);
  });

  it('applies the corrected republish of a dead-lettered event under the same idempotency key', async () => {
    const key = `theme:${DEAD_LETTERED_ID}:order-1`;
    const broken = sampleEvent(T, DEAD_LETTERED_ID, 1, { idempotency_key: key, event_id: freshEventId() });
    const first = await h.post('source-a', body(broken), { headers: providerHeaders(broken) });
    expect(first.status, describeAnswer(first)).toBe(202);
    const record = await eventually(async () => (await h.dlq(resourceKeyOf(broken)))[0], { timeoutMs: 30_000, message: 'dead-lettered' });
    expect(record.headers['dlq-reason']).toBe('constraint_violation');
    await h.settle();
    expect(await h.inbox(T, broken.event_id)).toMatchObject({ status: 'dead_lettered' });

    // The fault is spent; the provider fixes the event and republishes it under a new event_id.
    const corrected = sampleEvent(T, DEAD_LETTERED_ID, 2, { idempotency_key: key, event_id: freshEventId() });
    const second = await h.post('source-a', body(corrected), { headers: providerHeaders(corrected) });
    expect(second.status, describeAnswer(second)).toBe(202);
    await h.settle();

    expect(await h.inbox(T, corrected.event_id)).toMatchObject({ status: 'applied' });
    expect(await h.state(T, DEAD_LETTERED_ID)).toMatchObject({ version: 2, last_event_id: corrected.event_id });
    const applied = (await h.applied(resourceKeyOf(corrected))).map((r) => r.value);
    expect(applied.map((v) => [v.event_id, v.resource.version])).toEqual([[corrected.event_id, 2]]);
  });

  it('applies the corrected republish of a stale event under the same idempotency key', async () => {
    const id = freshId('stale');
    const ahead = sampleEvent(T, id, 5, { event_id: freshEventId() });
    const answer = await h.post('source-a', body(ahead), { headers: providerHeaders(ahead) });
    expect(answer.status, describeAnswer(answer)).toBe(202);
    await h.settle();
    expect(await h.state(T, id)).toMatchObject({ version: 5 });

    const key = `theme:${id}:order-7`;
    const x = sampleEvent(T, id, 1, { idempotency_key: key, event_id: freshEventId() });
    const sentX = await h.post('source-a', body(x), { headers: providerHeaders(x) });
    expect(sentX.status, describeAnswer(sentX)).toBe(202);
    await h.settle();
    expect(await h.inbox(T, x.event_id)).toMatchObject({ status: 'stale' });

    const y = sampleEvent(T, id, 6, { idempotency_key: key, event_id: freshEventId() });
    const sentY = await h.post('source-a', body(y), { headers: providerHeaders(y) });
    expect(sentY.status, describeAnswer(sentY)).toBe(202);
    await h.settle();

    expect(await h.inbox(T, y.event_id)).toMatchObject({ status: 'applied' });
    expect(await h.state(T, id)).toMatchObject({ version: 6, last_event_id: y.event_id });
    const applied = (await h.applied(resourceKeyOf(y))).map((r) => [r.value.event_id, r.value.resource.version]);
    expect(applied).toEqual([
      [ahead.event_id, 5],
      [y.event_id, 6],
    ]);
  });
});
