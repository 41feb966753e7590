import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { parseEnv } from 'node:util';
import { describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { startIngress } from '#services/ingress/ingress.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { loadSources } from '#domain/sources/index.ts';
import { testBrokers, testKafka, readTopic, topicRecordCount, useTestTopics } from '../kit/kafka.ts';
import {
  HMAC_SECRET,
  HMAC_SECRET_NEXT,
  post,
  readyz,
  send,
  signedRequest,
  startTestIngress,
  STD_SECRET,
  useIngress,
} from '../kit/ingress.ts';
import { sleep } from '../kit/eventually.ts';

describe('ingress against the real broker', () => {
  const {
    kafka,
    names: { events: topic },
    ingress,
  } = useIngress({
    topics: { eventsPartitions: 6, retryLevels: 0 },
    // A generous ack timeout: on a loaded test machine a 503 after a late ack would leave a
    // record without its 2xx, and this suite counts records against 2xx answers exactly.
    config: { ackTimeoutMs: 20_000 },
  });
  const accepted = new Set<string>();

  async function expectAccepted(request: ReturnType<typeof signedRequest>): Promise<void> {
    const answer = await post(ingress.url, request);
    expect(answer.status, answer.body).toBe(202);
    expect(JSON.parse(answer.body)).toEqual({ status: 'accepted', event_id: request.eventId });
    accepted.add(request.eventId);
  }

  it('accepts a signed hmac-sha256 webhook and publishes the raw body with key and headers', async () => {
    const event = sampleThemeEvent({ idempotency_key: 'idem-1' });
    // Unusual but valid whitespace: the exact bytes must reach Kafka, not a re-serialisation.
    const body = Buffer.from(JSON.stringify(event, null, 3));
    const request = signedRequest({ body, event });
    request.headers.push(['x-webhook-event', event.event_type], ['x-idempotency-key', 'idem-1']);
    await expectAccepted({ ...request, eventId: event.event_id });

    const records = await readTopic(kafka, topic);
    const record = records.find((r) => r.headers['event-id'] === event.event_id);
    expect(record).toBeDefined();
    expect(record!.value.equals(body)).toBe(true);
    expect(record!.key).toBe(`tenant_acme/theme/${event.resource.id}`);
    expect(record!.headers).toMatchObject({
      source: 'acme',
      'secret-id': 'acme-old',
      'event-type': 'theme.updated',
      'idempotency-key': 'idem-1',
    });
    expect(record!.headers['body-sha256']).toMatch(/^[0-9a-f]{64}$/);
    expect(Date.parse(record!.headers['received-at']!)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('accepts a standard-webhooks webhook', async () => {
    await expectAccepted(signedRequest({ scheme: 'standard-webhooks' }));
  });

  it('verifies old and new secrets during rotation and counts each', async () => {
    await expectAccepted(signedRequest({ secret: HMAC_SECRET }));
    await expectAccepted(signedRequest({ secret: HMAC_SECRET_NEXT }));
    const metrics = await (await fetch(`${ingress.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/webhook_signature_verifications_total\{source="acme",secret_id="acme-new"\} [1-9]/);
    expect(metrics).toMatch(/webhook_signature_verifications_total\{source="acme",secret_id="acme-old"\} [1-9]/);
  });

  it('refuses a removed secret once the source no longer lists it', async () => {
    const rotated = await startTestIngress(testBrokers(), topic, {
      sources: [
        {
          id: 'acme',
          scheme: 'hmac-sha256',
          secrets: [{ id: 'acme-new', value: HMAC_SECRET_NEXT }],
          tenants: ['tenant_acme'],
          toleranceSeconds: 300,
          resourceTypes: ['theme'],
        },
      ],
    });
    try {
      expect((await post(rotated.url, signedRequest({ secret: HMAC_SECRET }))).status).toBe(401);
      const ok = signedRequest({ secret: HMAC_SECRET_NEXT });
      expect((await post(rotated.url, ok)).status).toBe(202);
      accepted.add(ok.eventId);
    } finally {
      await rotated.close();
    }
  });

  it('answers every refusal with the documented status', async () => {
    const base = () => signedRequest();
    const withHeaders = (headers: Array<[string, string]>) => ({ ...base(), headers });
    const cases: Array<{ name: string; request: Parameters<typeof send>[1]; status: number; error?: string }> = [];
    const valid = base();
    // An unknown source is answered like a signature that does not verify: no oracle for which ids exist.
    cases.push({ name: 'unknown source', request: { ...valid, path: '/webhooks/nope' }, status: 401, error: 'unauthorized' });
    cases.push({
      name: 'unknown percent-encoded source',
      request: { ...valid, path: '/webhooks/ac%6De2' },
      status: 401,
      error: 'unauthorized',
    });
    cases.push({ name: 'GET', request: { ...valid, method: 'GET', body: '' }, status: 404 });
    cases.push({
      name: 'text/plain',
      request: withHeaders(valid.headers.map(([k, v]) => [k, k === 'content-type' ? 'text/plain' : v])),
      status: 415,
    });
    cases.push({ name: 'no content type', request: withHeaders(valid.headers.filter(([k]) => k !== 'content-type')), status: 415 });
    cases.push({
      name: 'charset latin1',
      request: withHeaders(valid.headers.map(([k, v]) => [k, k === 'content-type' ? 'application/json; charset=latin1' : v])),
      status: 415,
    });
    cases.push({ name: 'body over 1 MiB', request: { ...valid, body: Buffer.alloc(1024 * 1024 + 1, 0x20) }, status: 413 });
    for (const header of ['x-webhook-id', 'x-webhook-timestamp', 'x-webhook-signature']) {
      const r = base();
      // Without its timestamp the request is a complete hmac-sha256-body one: refused as unsigned (401).
      const status = header === 'x-webhook-timestamp' ? 401 : 400;
      cases.push({ name: `missing ${header}`, request: { ...r, headers: r.headers.filter(([k]) => k !== header) }, status });
      const d = base();
      const line = d.headers.find(([k]) => k === header)!;
      cases.push({ name: `repeated ${header}`, request: { ...d, headers: [...d.headers, line] }, status: 400 });
    }
    const stale = signedRequest({ timestamp: Math.floor(Date.now() / 1000) - 301 });
    cases.push({ name: 'timestamp too old', request: stale, status: 401, error: 'unauthorized' });
    // Far enough out that a slow run cannot bring it back inside the window before it is sent.
    const future = signedRequest({ timestamp: Math.floor(Date.now() / 1000) + 360 });
    cases.push({ name: 'timestamp too far ahead', request: future, status: 401, error: 'unauthorized' });
    cases.push({
      name: 'wrong secret',
      request: signedRequest({ secret: 'some-other-secret-0123456789' }),
      status: 401,
      error: 'unauthorized',
    });
    const reserialised = base();
    const parsed = JSON.parse(reserialised.body.toString()) as unknown;
    cases.push({
      name: 're-serialised body',
      request: { ...reserialised, body: Buffer.from(JSON.stringify(parsed, null, 2)) },
      status: 401,
      error: 'unauthorized',
    });
    const tampered = base();
    cases.push({
      name: 'tampered body',
      request: { ...tampered, body: Buffer.from(tampered.body.toString().replace('Minimal', 'Minimax')) },
      status: 401,
    });
    const malformedSig = base();
    cases.push({
      name: 'malformed signature',
      request: { ...malformedSig, headers: malformedSig.headers.map(([k, v]) => [k, k === 'x-webhook-signature' ? 'v1=zz' : v]) },
      status: 401,
    });
    // As an unknown id answers them (a 400 here told which ids exist, and their scheme).
    cases.push({ name: 'hmac headers on the std source', request: { ...base(), path: '/webhooks/acme-std' }, status: 401 });

    const signedBody = (body: Buffer, id = 'evt_x') => {
      const headers = signWebhook({ scheme: 'hmac-sha256', secret: HMAC_SECRET, body, id });
      return { path: '/webhooks/acme', headers: Object.entries(headers), body };
    };
    cases.push({
      name: 'invalid UTF-8',
      request: signedBody(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])),
      status: 400,
      error: 'invalid_utf8',
    });
    cases.push({ name: 'invalid JSON', request: signedBody(Buffer.from('{"event_id":')), status: 400, error: 'invalid_json' });
    cases.push({ name: 'too deep', request: signedBody(Buffer.from('['.repeat(100) + ']'.repeat(100))), status: 400, error: 'too_deep' });
    const proto = JSON.stringify(sampleThemeEvent({ event_id: 'evt_x' })).replace('{', '{"__proto__":{"admin":true},');
    cases.push({ name: '__proto__ key', request: signedBody(Buffer.from(proto)), status: 400, error: 'forbidden_key' });
    const ctor = JSON.stringify(sampleThemeEvent({ event_id: 'evt_x' })).replace('"data":{', '"data":{"constructor":{"x":1},');
    cases.push({ name: 'constructor key', request: signedBody(Buffer.from(ctor)), status: 400, error: 'forbidden_key' });
    const v2 = { ...sampleThemeEvent({ event_id: 'evt_x' }), event_version: 2 };
    cases.push({
      name: 'unknown event_version',
      request: signedBody(Buffer.from(JSON.stringify(v2))),
      status: 422,
      error: 'unknown_event_version',
    });
    const invalid = { ...sampleThemeEvent({ event_id: 'evt_x' }), tenant_id: 'a/b' };
    cases.push({
      name: 'invalid envelope',
      request: signedBody(Buffer.from(JSON.stringify(invalid))),
      status: 422,
      error: 'invalid_envelope',
    });
    const badTheme = sampleThemeEvent({ event_id: 'evt_x' });
    (badTheme.data as { palette: { background: string } }).palette.background = 'blue';
    cases.push({
      name: 'invalid theme snapshot',
      request: signedBody(Buffer.from(JSON.stringify(badTheme))),
      status: 422,
      error: 'invalid_data',
    });
    const exploded = sampleThemeEvent({ event_id: 'evt_x', event_type: 'theme.exploded' });
    cases.push({
      name: 'an action outside the contract',
      request: signedBody(Buffer.from(JSON.stringify(exploded))),
      status: 422,
      error: 'invalid_envelope',
    });
    const palette = { ...sampleThemeEvent({ event_id: 'evt_x', event_type: 'palette.updated' }), data: {} };
    palette.resource = { ...palette.resource, type: 'palette' };
    cases.push({
      name: 'a resource type the source does not list',
      request: signedBody(Buffer.from(JSON.stringify(palette))),
      status: 422,
      error: 'resource_type_not_allowed',
    });
    const nul = JSON.stringify(sampleThemeEvent({ event_id: 'evt_x' })).replace('"Minimal Dark"', '"Minimal\\u0000Dark"');
    cases.push({ name: 'NUL in a string', request: signedBody(Buffer.from(nul)), status: 422, error: 'invalid_string' });
    cases.push({
      name: 'id header differs from event_id',
      request: signedBody(Buffer.from(JSON.stringify(sampleThemeEvent())), 'evt_other'),
      status: 400,
      error: 'event_id_mismatch',
    });
    const typed = signedRequest();
    cases.push({
      name: 'event header differs',
      request: { ...typed, headers: [...typed.headers, ['x-webhook-event', 'theme.deleted']] },
      status: 400,
      error: 'event_type_mismatch',
    });
    const retry = signedRequest();
    cases.push({
      name: 'retry header not a number',
      request: { ...retry, headers: [...retry.headers, ['x-webhook-retry', 'two']] },
      status: 400,
      error: 'bad_request',
    });
    const aliased = signedRequest();
    cases.push({
      name: 'id header and its alias differ',
      request: { ...aliased, headers: [...aliased.headers, ['x-webhook-event-id', 'evt_other']] },
      status: 400,
      error: 'event_id_mismatch',
    });
    cases.push({
      name: 'tenant not allowed',
      request: signedRequest({ event: { tenant_id: 'tenant_evil' } }),
      status: 403,
      error: 'forbidden',
    });

    const before = await topicRecordCount(kafka, topic);
    for (const c of cases) {
      const answer = await send(ingress.url, c.request);
      expect(answer.status, `${c.name}: ${answer.body}`).toBe(c.status);
      expect(answer.headers['content-type'], c.name).toMatch(/application\/json/);
      if (c.error) expect(JSON.parse(answer.body).error, c.name).toBe(c.error);
      if (c.status === 401) expect(answer.body, c.name).toBe('{"error":"unauthorized"}');
    }
    expect(await topicRecordCount(kafka, topic)).toBe(before);

    const metrics = await (await fetch(`${ingress.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/webhook_signature_failures_total\{source="acme",reason="timestamp_out_of_window"\} 2/);
    expect(metrics).toMatch(/webhook_signature_failures_total\{source="acme",reason="repeated_header"\} 3/);
    expect(metrics).toMatch(/webhook_requests_total\{source="unknown",event_type="unknown",status="401"\} 2/);
    expect(metrics).toMatch(/webhook_signature_failures_total\{source="unknown",reason="unknown_source"\} 2/);
    expect(metrics).toMatch(/webhook_clock_skew_seconds_bucket/);
    expect(metrics).toMatch(/webhook_request_duration_seconds_bucket/);
    expect(metrics).toMatch(/webhook_publish_latency_seconds_count [1-9]/);
  });

  it('answers an unknown source exactly like a known source whose signature fails', async () => {
    const wrongSecret = signedRequest({ secret: 'some-other-secret-0123456789' });
    const known = await send(ingress.url, wrongSecret);
    const unknown = await send(ingress.url, { ...signedRequest(), path: '/webhooks/no-such-source' });
    expect(unknown.status).toBe(401);
    expect(unknown.body).toBe(known.body);
    const comparable = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => k !== 'date'));
    expect(comparable(unknown.headers)).toEqual(comparable(known.headers));
    // A header problem is answered the same way too (as a source of the default scheme would).
    const bare = signedRequest();
    const noSignature = { ...bare, headers: bare.headers.filter(([k]) => k !== 'x-webhook-signature') };
    const knownBare = await send(ingress.url, noSignature);
    const unknownBare = await send(ingress.url, { ...noSignature, path: '/webhooks/no-such-source' });
    expect([unknownBare.status, unknownBare.body]).toEqual([knownBare.status, knownBare.body]);

    // Same timing class: both read the whole body before answering (no early answer for an unknown id).
    const { port } = new URL(ingress.url);
    const firstAnswer = async (path: string) => {
      const socket = net.connect(Number(port), '127.0.0.1');
      await once(socket, 'connect');
      let answer = '';
      socket.on('data', (c: Buffer) => (answer += c.toString()));
      const r = signedRequest({ secret: 'some-other-secret-0123456789' });
      const head = [`POST ${path} HTTP/1.1`, 'Host: x', `Content-Length: ${r.body.length}`, ...r.headers.map(([k, v]) => `${k}: ${v}`)];
      socket.write(`${head.join('\r\n')}\r\n\r\n`);
      await sleep(300);
      const beforeBody = answer;
      socket.write(r.body);
      while (!/\r\n\r\n/.test(answer)) await sleep(20);
      socket.destroy();
      return { beforeBody, status: answer.slice(9, 12) };
    };
    expect(await firstAnswer('/webhooks/acme')).toEqual({ beforeBody: '', status: '401' });
    expect(await firstAnswer('/webhooks/no-such-source')).toEqual({ beforeBody: '', status: '401' });
  });

  it('answers 200 concurrent requests on one hot key with exactly as many records', async () => {
    const before = await topicRecordCount(kafka, topic);
    const requests = Array.from({ length: 200 }, (_, i) => signedRequest({ event: { resource: { id: 'theme_hot', version: i + 1 } } }));
    const answers = await Promise.all(requests.map((r) => post(ingress.url, r)));
    const ok = answers.filter((a) => a.status === 202).length;
    expect(answers.every((a) => a.status === 202 || a.status === 503)).toBe(true);
    expect(ok).toBe(200);
    requests.forEach((r) => accepted.add(r.eventId));
    expect(await topicRecordCount(kafka, topic)).toBe(before + ok);
  });

  it('answers 200 concurrent requests on many keys with exactly as many records', async () => {
    const before = await topicRecordCount(kafka, topic);
    const requests = Array.from({ length: 200 }, (_, i) => signedRequest({ event: { resource: { id: `theme_${i}` } } }));
    const answers = await Promise.all(requests.map((r) => post(ingress.url, r)));
    expect(answers.filter((a) => a.status === 202).length).toBe(200);
    requests.forEach((r) => accepted.add(r.eventId));
    expect(await topicRecordCount(kafka, topic)).toBe(before + 200);
  });

  it('lands sequential requests for one key in ack order', async () => {
    const order: string[] = [];
    for (let version = 1; version <= 25; version += 1) {
      const request = signedRequest({ event: { resource: { id: 'theme_seq', version } } });
      const answer = await post(ingress.url, request);
      expect(answer.status).toBe(202);
      order.push(request.eventId);
      accepted.add(request.eventId);
    }
    const records = await readTopic(kafka, topic);
    const seq = records.filter((r) => r.key === 'tenant_acme/theme/theme_seq');
    expect(new Set(seq.map((r) => r.partition)).size).toBe(1);
    seq.sort((a, b) => Number(a.offset) - Number(b.offset));
    expect(seq.map((r) => r.headers['event-id'])).toEqual(order);
  });

  it('has exactly one record per 2xx answer on the topic', async () => {
    const records = await readTopic(kafka, topic);
    const ids = records.map((r) => r.headers['event-id']);
    expect(ids.length).toBe(accepted.size);
    expect(new Set(ids)).toEqual(accepted);
  });

  it('drops a client that sends its headers too slowly', async () => {
    const slow = await startTestIngress(testBrokers(), topic, { headersTimeoutMs: 300, requestTimeoutMs: 600 });
    try {
      const { port } = new URL(slow.url);
      const socket = net.connect(Number(port), '127.0.0.1');
      await once(socket, 'connect');
      socket.write('POST /webhooks/acme HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n');
      const started = Date.now();
      let answer = '';
      socket.on('data', (c: Buffer) => (answer += c.toString()));
      await once(socket, 'close');
      // Liveness bound, far above the 300 ms headers timeout and below Node's own 60 s default.
      expect(Date.now() - started).toBeLessThan(30_000);
      expect(answer).toMatch(/^HTTP\/1.1 408/);
    } finally {
      await slow.close();
    }
  });

  it('reports ready and healthy on the admin port', async () => {
    expect(await readyz(ingress)).toBe(200);
    expect((await fetch(`${ingress.adminUrl}/healthz`)).status).toBe(200);
  });
});

describe('known-answer vectors over HTTP', () => {
  const kafka = testKafka();
  const topic = useTestTopics(kafka, { eventsPartitions: 1, retryLevels: 0 }).names.events;

  it('accepts the Standard Webhooks vector and refuses its negative cases', async () => {
    // The vector's timestamp is from 2021: move the ingress clock instead of the vector.
    let now = 1614265330;
    const fixed = await startIngress(
      {
        port: 0,
        host: '127.0.0.1',
        adminPort: 0,
        adminHost: '127.0.0.1',
        brokers: testBrokers(),
        topic,
        sources: [
          {
            id: 'svix',
            scheme: 'standard-webhooks',
            secrets: [{ id: 's', value: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }],
            tenants: ['tenant_acme'],
            toleranceSeconds: 300,
            resourceTypes: ['theme'],
          },
        ],
      },
      { logger: createLogger({ name: 'kat', level: 'silent' }), nowSeconds: () => now },
    );
    try {
      const body = '{"test": 2432232314}';
      const good = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';
      const request = (signature: string, overrides: Record<string, string> = {}) => ({
        path: '/webhooks/svix',
        body,
        headers: Object.entries({
          'content-type': 'application/json',
          'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
          'webhook-timestamp': '1614265330',
          'webhook-signature': signature,
          ...overrides,
        }),
      });
      // Signature verified; the body is then no envelope: 422 proves verification passed.
      expect((await send(fixed.url, request(good))).status).toBe(422);
      expect((await send(fixed.url, request(`v2,abc ${good}`))).status).toBe(422);
      expect((await send(fixed.url, request('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA='))).status).toBe(401);
      expect((await send(fixed.url, request(good, { 'webhook-id': 'msg_other' }))).status).toBe(401);
      expect((await send(fixed.url, request(good, { 'webhook-timestamp': '1614265331' }))).status).toBe(401);
      expect((await send(fixed.url, { ...request(good), body: '{"test":2432232314}' })).status).toBe(401);
      expect((await send(fixed.url, request('v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='))).status).toBe(401);
      now = 1614265330 + 301;
      expect((await send(fixed.url, request(good))).status).toBe(401);
      now = 1614265330 - 301;
      expect((await send(fixed.url, request(good))).status).toBe(401);
    } finally {
      await fixed.close();
    }
    expect(await topicRecordCount(kafka, topic)).toBe(0);
  });

  it('accepts a fixed hmac-sha256 vector computed with openssl', async () => {
    const ingress = await startIngress(
      {
        port: 0,
        host: '127.0.0.1',
        adminPort: 0,
        adminHost: '127.0.0.1',
        brokers: testBrokers(),
        topic,
        sources: [
          {
            id: 'acme',
            scheme: 'hmac-sha256',
            secrets: [{ id: 'k', value: HMAC_SECRET }],
            tenants: ['tenant_acme'],
            toleranceSeconds: 300,
            resourceTypes: ['theme'],
          },
        ],
      },
      { logger: createLogger({ name: 'kat', level: 'silent' }), nowSeconds: () => 1767225600 },
    );
    try {
      const body =
        '{"event_id":"evt_fixed_0001","event_type":"theme.deleted","event_version":1,"occurred_at":"2026-01-01T00:00:00Z",' +
        '"tenant_id":"tenant_acme","resource":{"type":"theme","id":"theme_fixed","version":7}}';
      // printf '%s' "1767225600.$BODY" | openssl dgst -sha256 -hmac "$SECRET" -hex
      const signature = 'v1=c878fb68a7216c1e3c1d18e61f063487ea8e5d4493122f60515095c6b834bee0';
      const headers = Object.entries({
        'content-type': 'application/json',
        'x-webhook-id': 'evt_fixed_0001',
        'x-webhook-timestamp': '1767225600',
        'x-webhook-signature': signature,
      });
      expect((await send(ingress.url, { path: '/webhooks/acme', headers, body })).status).toBe(202);
      const rotating = headers.map(
        ([k, v]) => [k, k === 'x-webhook-signature' ? `v1=${'0'.repeat(64)} ${signature}` : v] as [string, string],
      );
      expect((await send(ingress.url, { path: '/webhooks/acme', headers: rotating, body })).status).toBe(202);
      expect(await topicRecordCount(kafka, topic)).toBe(2);
    } finally {
      await ingress.close();
    }
  });

  it('accepts a webhook signed with the committed dev configuration', async () => {
    const env = parseEnv(readFileSync('infra/dev/dev.env', 'utf8'));
    const sources = loadSources('infra/dev/dev-sources.json', env);
    const ingress = await startTestIngress(testBrokers(), topic, { sources });
    try {
      expect((await post(ingress.url, signedRequest({ source: 'demo', secret: env.DEMO_SECRET! }))).status).toBe(202);
      expect(
        (await post(ingress.url, signedRequest({ source: 'demo-std', scheme: 'standard-webhooks', secret: env.DEMO_STD_SECRET! }))).status,
      ).toBe(202);
      expect(STD_SECRET).not.toBe(env.DEMO_STD_SECRET);
    } finally {
      await ingress.close();
    }
  });
});
