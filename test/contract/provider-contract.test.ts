import { describe, expect, it } from 'vitest';
import {
  body,
  contractExample,
  describeAnswer,
  errorCode,
  freshEventId,
  freshId,
  hmacSource,
  providerHeaders,
  resourceKeyOf,
  sampleEvent,
  SECRET_A,
  useHarness,
} from '../kit/harness.ts';

const TENANT = 'tenant_acme';
const SOURCE = 'provider';

/** "Providers as they really send": the contract's example, redeliveries, bad strings, bad types, provider headers. */
describe('contract: providers as they really send (real ingress, worker, Kafka and Postgres)', () => {
  const h = useHarness({ sources: [hmacSource(SOURCE, SECRET_A, [TENANT])] });

  async function expectApplied(event: ReturnType<typeof contractExample>) {
    const key = resourceKeyOf(event);
    expect(await h.inbox(TENANT, event.event_id)).toMatchObject({ status: 'applied' });
    const records = (await h.applied(key)).filter((r) => r.value.event_id === event.event_id);
    expect(records).toHaveLength(1);
    expect(records[0]!.value.data).toEqual(event.data);
  }

  it("accepts the contract's own example exactly as written, and passes its data through unchanged", async () => {
    const event = contractExample();
    const answer = await h.post(SOURCE, body(event), { headers: providerHeaders(event) });
    expect(answer.status, describeAnswer(answer)).toBe(202);
    await h.settle();
    await expectApplied(event);
  });

  it("passes unknown fields of the example's data through to the applied topic", async () => {
    const event = contractExample();
    event.data.tags = ['dark'];
    event.data.palette = { ...(event.data.palette as Record<string, unknown>), muted: '#333' };
    const answer = await h.post(SOURCE, body(event), { headers: providerHeaders(event) });
    expect(answer.status, describeAnswer(answer)).toBe(202);
    await h.settle();
    await expectApplied(event);
  });

  it('treats a redelivery (delivery_attempt 2, or other whitespace) of an accepted event as the same event', async () => {
    const id = freshId('redeliver');
    const event = sampleEvent(TENANT, id, 3, { idempotency_key: `theme:${id}:v3`, event_id: freshEventId() });
    const key = resourceKeyOf(event);
    const first = await h.post(SOURCE, body(event), { headers: providerHeaders(event) });
    expect(first.status, describeAnswer(first)).toBe(202);
    await h.settle();
    expect(await h.inbox(TENANT, event.event_id)).toMatchObject({ status: 'applied' });

    const secondAttempt = await h.post(SOURCE, body({ ...event, delivery_attempt: 2 }), { headers: providerHeaders(event) });
    const reformatted = await h.post(SOURCE, JSON.stringify(event, null, 2), { headers: providerHeaders(event) });
    expect(secondAttempt.status, describeAnswer(secondAttempt)).toBe(202);
    expect(reformatted.status, describeAnswer(reformatted)).toBe(202);
    await h.settle();

    expect(await h.applied(key)).toHaveLength(1);
    expect((await h.dlq(key)).map((r) => `${r.headers['dlq-reason']}: ${r.value.toString()}`)).toEqual([]);
    expect(await h.inbox(TENANT, event.event_id)).toMatchObject({ status: 'applied' });
    expect(await h.anomalies(TENANT, event.event_id)).toBe(0);
  });

  it('refuses NUL and lone surrogates in any string or key with 422 invalid_string, publishing nothing', async () => {
    const base = () => sampleEvent(TENANT, freshId('strings'), 1);
    const withName = (name: string) => {
      const event = base();
      return body({ ...event, data: { ...event.data, name } });
    };
    const withExtra = (extra: Record<string, unknown>) => {
      const event = base();
      return body({ ...event, data: { ...event.data, ...extra } });
    };
    const bodies: Record<string, string> = {
      'NUL in data.name': withName('a\u0000b'),
      'lone high surrogate in data.name': withName('a\ud800b'),
      'lone low surrogate at the end of data.name': withName('ab\udfff'),
      'NUL in a nested array string': withExtra({ tags: ['ok', 'x\u0000'] }),
      'NUL in an object key': withExtra({ extra: { 'k\u0000': 1 } }),
      'lone surrogate in an object key': withExtra({ '\ud800key': true }),
    };
    // Sent as JSON escapes (ASCII on the wire, so valid UTF-8): JSON.stringify writes \u0000 and lone surrogates that way.
    for (const [what, text] of Object.entries(bodies)) expect(text, what).toMatch(/\\u(0000|d800|dfff)/);

    const before = await h.eventsCount();
    const answers: Record<string, string> = {};
    for (const [what, text] of Object.entries(bodies)) {
      const answer = await h.post(SOURCE, text);
      answers[what] = `${answer.status} ${errorCode(answer)}`;
    }
    expect(answers).toEqual(Object.fromEntries(Object.keys(bodies).map((what) => [what, '422 invalid_string'])));
    expect(await h.eventsCount()).toBe(before);
  });

  it('refuses an event_type the contract does not define (theme.exploded) without minting a metric label for it', async () => {
    const event = sampleEvent(TENANT, freshId('exploded'), 1, { event_type: 'theme.exploded' });
    const answer = await h.post(SOURCE, body(event), { headers: providerHeaders(event) });
    const metrics = await (await fetch(`${h.ingress.adminUrl}/metrics`)).text();
    expect.soft(answer.status, describeAnswer(answer)).toBeGreaterThanOrEqual(400);
    expect.soft(answer.status, describeAnswer(answer)).toBeLessThan(500);
    expect.soft(errorCode(answer), describeAnswer(answer)).toBe('invalid_envelope');
    expect(metrics.split('\n').filter((line) => line.includes('theme.exploded'))).toEqual([]);
  });

  describe('provider headers', () => {
    const event = (name: string) => {
      const id = freshId(name);
      return sampleEvent(TENANT, id, 1, { idempotency_key: `theme:${id}:v1`, event_id: freshEventId() });
    };

    it('answers 400 event_type_mismatch when X-Webhook-Event disagrees with the body', async () => {
      const e = event('hdr-type');
      const answer = await h.post(SOURCE, body(e), { headers: { ...providerHeaders(e), 'X-Webhook-Event': 'theme.created' } });
      expect(answer.status, describeAnswer(answer)).toBe(400);
      expect(errorCode(answer)).toBe('event_type_mismatch');
    });

    it('answers 400 idempotency_key_mismatch when X-Idempotency-Key disagrees with the body', async () => {
      const e = event('hdr-idem');
      const answer = await h.post(SOURCE, body(e), {
        headers: { ...providerHeaders(e), 'X-Idempotency-Key': `${e.idempotency_key}:other` },
      });
      expect(answer.status, describeAnswer(answer)).toBe(400);
      expect(errorCode(answer)).toBe('idempotency_key_mismatch');
    });

    it('accepts X-Webhook-Event-Id in place of X-Webhook-Id', async () => {
      const e = event('hdr-evid');
      const answer = await h.post(SOURCE, body(e), {
        headers: { ...providerHeaders(e), 'x-webhook-id': undefined, 'X-Webhook-Event-Id': e.event_id },
      });
      expect(answer.status, describeAnswer(answer)).toBe(202);
    });

    it('answers 400 event_id_mismatch when X-Webhook-Event-Id disagrees with the body', async () => {
      const e = event('hdr-evid-bad');
      const answer = await h.post(SOURCE, body(e), {
        headers: { ...providerHeaders(e), 'x-webhook-id': undefined, 'X-Webhook-Event-Id': freshEventId() },
      });
      expect(answer.status, describeAnswer(answer)).toBe(400);
      expect(errorCode(answer)).toBe('event_id_mismatch');
    });

    it("records X-Webhook-Retry as the inbox row's delivery_attempt", async () => {
      // Without delivery_attempt in the body, the header is the only place the attempt is stated.
      const { delivery_attempt: _omitted, ...e } = event('hdr-retry');
      const answer = await h.post(SOURCE, body(e), { headers: { ...providerHeaders(e), 'X-Webhook-Retry': '3' } });
      expect(answer.status, describeAnswer(answer)).toBe(202);
      await h.settle();
      const { rows } = await h.db.pool.query<{ status: string; delivery_attempt: number | null }>(
        'SELECT status, delivery_attempt FROM inbox_events WHERE tenant_id = $1 AND event_id = $2',
        [TENANT, e.event_id],
      );
      expect(rows).toHaveLength(1);
      const row = rows[0];
      expect(row).toEqual({ status: 'applied', delivery_attempt: 3 });
    });
  });
});
