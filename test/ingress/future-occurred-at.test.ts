import { describe, expect, it } from 'vitest';
import type { WebhookSource } from '#domain/sources/index.ts';
import { readTopic } from '../kit/kafka.ts';
import { HMAC_SECRET, post, signedRequest, testSources, useIngress } from '../kit/ingress.ts';

// A provider whose clock runs decades ahead signs an event dated 2062: accepted, it would make
// every later update of its resource stale on a type ordered by occurred_at. The ingress refuses
// an occurred_at further ahead of its own clock than the source's bound, and says so.

const WIDE_SECRET = 'test-hmac-secret-wide-0123456789ab';

function sources(): WebhookSource[] {
  return [
    ...testSources(),
    // A source whose provider is known to run ahead: a wider bound of its own.
    {
      id: 'acme-wide',
      scheme: 'hmac-sha256',
      secrets: [{ id: 'wide-1', value: WIDE_SECRET }],
      tenants: ['tenant_acme'],
      toleranceSeconds: 300,
      resourceTypes: ['theme'],
      maxFutureSkewSeconds: 3600,
    },
    // A type ordered by time, where a date from the future freezes the resource.
    {
      id: 'acme-time',
      scheme: 'hmac-sha256',
      secrets: [{ id: 'time-1', value: `${HMAC_SECRET}-time` }],
      tenants: ['tenant_acme'],
      toleranceSeconds: 300,
      resourceTypes: ['theme'],
      occurredAtTypes: ['theme'],
    },
  ];
}

const secondsFromNow = (s: number) => new Date(Date.now() + s * 1000).toISOString();

describe('ingress: an occurred_at from the future', () => {
  const {
    kafka,
    names: { events: topic },
    ingress,
  } = useIngress({ topics: { eventsPartitions: 1, retryLevels: 0 }, config: { sources: sources(), ackTimeoutMs: 20_000 } });

  const metrics = async () => (await fetch(`${ingress.adminUrl}/metrics`)).text();

  it('answers 422 with how far ahead and the bound, publishes nothing, and counts the refusal by reason', async () => {
    const refused = signedRequest({ event: { occurred_at: '2062-01-01T00:00:00Z' } });
    const answer = await post(ingress.url, refused);
    expect(answer.status, answer.body).toBe(422);
    const body = JSON.parse(answer.body) as { error: string; message: string };
    expect(body.error).toBe('occurred_at_in_future');
    expect(body.message).toMatch(
      /^occurred_at 2062-01-01T00:00:00Z is \d+ s ahead of the receiving clock \(20\d\d-.+Z\); at most 300 s ahead is accepted/,
    );
    // Nothing was stored: the provider may send the same event id again with a correct time.
    expect(body.message).toContain('send the event again');

    const timeOrdered = signedRequest({
      source: 'acme-time',
      secret: `${HMAC_SECRET}-time`,
      event: { occurred_at: '2062-01-01T00:00:00Z' },
    });
    expect((await post(ingress.url, timeOrdered)).status).toBe(422);

    const text = await metrics();
    expect(text).toMatch(/webhook_event_refusals_total\{source="acme",reason="occurred_at_in_future"\} 1\b/);
    expect(text).toMatch(/webhook_event_refusals_total\{source="acme-time",reason="occurred_at_in_future"\} 1\b/);
    expect(text).toMatch(/webhook_requests_total\{source="acme",event_type="theme.updated",status="422"\} 1\b/);

    // Accepted events after the refusals prove the topic is read to its end.
    const accepted = signedRequest({ event: { occurred_at: secondsFromNow(60) } });
    expect((await post(ingress.url, accepted)).status).toBe(202);
    const ids = (await readTopic(kafka, topic)).map((r) => r.headers['event-id']);
    expect(ids).toContain(accepted.eventId);
    expect(ids).not.toContain(refused.eventId);
    expect(ids).not.toContain(timeOrdered.eventId);
  });

  it('accepts an occurred_at within the bound (clocks disagree by seconds) and in the past', async () => {
    for (const occurred_at of [secondsFromNow(240), secondsFromNow(-86_400), '2001-01-01T00:00:00Z']) {
      const answer = await post(ingress.url, signedRequest({ event: { occurred_at } }));
      expect(answer.status, `${occurred_at}: ${answer.body}`).toBe(202);
    }
    const timeOrdered = signedRequest({ source: 'acme-time', secret: `${HMAC_SECRET}-time`, event: { occurred_at: secondsFromNow(240) } });
    expect((await post(ingress.url, timeOrdered)).status).toBe(202);
  });

  it("judges by the source's own bound, and the record carries the bound it was accepted under", async () => {
    const within = signedRequest({ source: 'acme-wide', secret: WIDE_SECRET, event: { occurred_at: secondsFromNow(1800) } });
    expect((await post(ingress.url, within)).status).toBe(202);
    const beyond = signedRequest({ source: 'acme-wide', secret: WIDE_SECRET, event: { occurred_at: secondsFromNow(7200) } });
    const answer = await post(ingress.url, beyond);
    expect(answer.status).toBe(422);
    expect(JSON.parse(answer.body).message).toContain('at most 3600 s ahead is accepted');

    const records = await readTopic(kafka, topic);
    const wide = records.find((r) => r.headers['event-id'] === within.eventId);
    // So the worker judges a replay of it by the same bound, whatever it knows of the source.
    expect(wide?.headers['max-future-skew']).toBe('3600');
    // The default bound writes no header: the worker's default is the same.
    const plain = records.find((r) => r.headers.source === 'acme');
    expect(plain?.headers['max-future-skew']).toBeUndefined();
  });
});
