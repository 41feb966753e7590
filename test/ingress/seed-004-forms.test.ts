import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { readTopic, topicRecordCount } from '../kit/kafka.ts';
import { HMAC_SECRET, HMAC_SECRET_NEXT, send, useIngress } from '../kit/ingress.ts';

// A provider following seed 004 to the letter: X-Webhook-Signature is the bare hex HMAC-SHA256 of
// `${timestamp}.${raw body}`, X-Webhook-Timestamp is unix seconds or an ISO-8601 time. The
// signatures here are computed with node:crypto directly, not with the bridge's signing module.

function seed004Request(timestamp: string, options: { signature?: (hex: string) => string; secret?: string } = {}) {
  const event = sampleThemeEvent();
  const body = Buffer.from(JSON.stringify(event));
  const hex = createHmac('sha256', options.secret ?? HMAC_SECRET)
    .update(`${timestamp}.`)
    .update(body)
    .digest('hex');
  const headers: Array<[string, string]> = [
    ['content-type', 'application/json'],
    ['x-webhook-event-id', event.event_id],
    ['x-webhook-timestamp', timestamp],
    ['x-webhook-signature', options.signature ? options.signature(hex) : hex],
  ];
  return { path: '/webhooks/acme', headers, body, eventId: event.event_id };
}

/** An ISO-8601 time `offsetSeconds` from now, whole seconds, in the given zone offset (minutes east of UTC). */
function isoAt(offsetSeconds: number, zoneMinutes = 0): string {
  const at = new Date((Math.floor(Date.now() / 1000) + offsetSeconds) * 1000 + zoneMinutes * 60_000);
  const local = at.toISOString().slice(0, 19);
  if (zoneMinutes === 0) return `${local}Z`;
  const sign = zoneMinutes < 0 ? '-' : '+';
  const abs = Math.abs(zoneMinutes);
  return `${local}${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

describe("seed 004's signature and timestamp forms, against a real ingress and broker", () => {
  const {
    kafka,
    names: { events: topic },
    ingress,
  } = useIngress({ topics: { eventsPartitions: 1, retryLevels: 0 }, config: { ackTimeoutMs: 20_000 } });

  it.each([
    ['bare hex, unix seconds', () => seed004Request(String(Math.floor(Date.now() / 1000)))],
    ['bare hex, ISO with Z', () => seed004Request(isoAt(0))],
    ['bare hex, ISO with an offset', () => seed004Request(isoAt(-30, 330))],
    [
      'v1=, ISO with a negative offset and a fraction',
      () => seed004Request(isoAt(0, -300).replace(/-05:00$/, '.250-05:00'), { signature: (h) => `v1=${h}` }),
    ],
    [
      'bare hex of the next secret beside a stale one (rotation)',
      () => seed004Request(isoAt(0), { secret: HMAC_SECRET_NEXT, signature: (h) => `${'0'.repeat(64)} ${h}` }),
    ],
  ])('accepts %s and publishes the body unchanged', async (_name, make) => {
    const request = make();
    const answer = await send(ingress.url, request);
    expect(answer.status, answer.body).toBe(202);
    expect(JSON.parse(answer.body)).toEqual({ status: 'accepted', event_id: request.eventId });
    const record = (await readTopic(kafka, topic)).find((r) => r.headers['event-id'] === request.eventId);
    expect(record?.value.equals(request.body)).toBe(true);
  });

  it('refuses a timestamp in neither form with 400, stale or future ISO times with 401, and counts each reason', async () => {
    const before = await topicRecordCount(kafka, topic);
    // Well outside the window: a second boundary between signing and verifying must not bring a
    // future time back inside it (the exact edges are the unit tests' job).
    const cases: Array<[string, ReturnType<typeof seed004Request>, number]> = [
      ['no zone', seed004Request(isoAt(0).replace('Z', '')), 400],
      ['an HTTP date', seed004Request(new Date().toUTCString()), 400],
      ['stale ISO', seed004Request(isoAt(-330)), 401],
      ['future ISO with an offset', seed004Request(isoAt(330, 120)), 401],
      ['the same instant written otherwise than signed', { ...seed004Request(isoAt(0)) }, 401],
    ];
    // Signed as `...Z`, sent as `...+00:00`: the signature covers the string, not the instant.
    const rewritten = cases[4]![1];
    rewritten.headers = rewritten.headers.map(([k, v]) => [k, k === 'x-webhook-timestamp' ? v.replace('Z', '+00:00') : v]);
    for (const [name, request, status] of cases) {
      const answer = await send(ingress.url, request);
      expect(answer.status, `${name}: ${answer.body}`).toBe(status);
      if (status === 401) expect(answer.body).toBe('{"error":"unauthorized"}');
      else expect(JSON.parse(answer.body)).toMatchObject({ error: 'bad_request' });
    }
    expect(await topicRecordCount(kafka, topic)).toBe(before);
    const metrics = await (await fetch(`${ingress.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/webhook_signature_failures_total\{source="acme",reason="malformed_timestamp"\} 2/);
    expect(metrics).toMatch(/webhook_signature_failures_total\{source="acme",reason="timestamp_out_of_window"\} 2/);
    expect(metrics).toMatch(/webhook_signature_failures_total\{source="acme",reason="no_matching_signature"\} 1/);
  });

  it('answers a malformed timestamp to an unknown source as to a source of the default scheme', async () => {
    const request = { ...seed004Request('yesterday'), path: '/webhooks/no-such-source' };
    const known = await send(ingress.url, seed004Request('yesterday'));
    const unknown = await send(ingress.url, request);
    expect(unknown.status).toBe(known.status);
    expect(unknown.body).toBe(known.body);
  });
});
