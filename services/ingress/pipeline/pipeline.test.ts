import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { contractExampleEvent, sampleThemeEvent, type ReceivedEnvelope, type SampleThemeEventOverrides } from '#domain/contract/index.ts';
import { signWebhook, type SignatureScheme } from '#domain/signing/index.ts';
import { loadSources } from '#domain/sources/index.ts';
import { createIngressMetrics, type IngressMetrics } from '../metrics.ts';
import { PublishError, type PublishErrorCode, type PublishRecord } from '../publisher.ts';
import { acceptedAnswer, answerHeaders, countRejection, rejectionAnswer, type Answer } from './answer.ts';
import { parseAndMatch } from './parse.ts';
import { SourceLimiter } from './limit.ts';
import { bodyRejection, preflight, SourceDirectory, type Delivery, type PreflightOptions } from './preflight.ts';
import { publish, type EventPublisher } from './publish.ts';
import { REJECTIONS, type Rejection, type RejectionKind } from './rejections.ts';
import type { RequestHeaders } from './request.ts';
import { verify, type VerifiedSignature } from './verify.ts';

// The pipeline steps driven directly, without express or a socket: the dev sources, signed
// bodies, a fixed clock and a publisher that records what it is given.

const SECRETS = {
  DEMO_SECRET: 'a-long-enough-hmac-secret',
  DEMO_STD_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  DEMO_BODY_SECRET: 'a-long-enough-hmac-body-secret',
  DEMO_STRICT_SECRET: 'a-long-enough-hmac-strict-secret',
  DEMO_TIME_SECRET: 'another-long-enough-hmac-secret',
};
const SOURCES = loadSources('infra/dev/dev-sources.json', SECRETS);
const SECRET_OF: Record<string, string> = {
  demo: SECRETS.DEMO_SECRET,
  'demo-std': SECRETS.DEMO_STD_SECRET,
  'demo-body': SECRETS.DEMO_BODY_SECRET,
  'demo-strict': SECRETS.DEMO_STRICT_SECRET,
  'demo-time': SECRETS.DEMO_TIME_SECRET,
};
const NOW = 1_790_000_000;
const clock = () => NOW;
// The machine's clock, not a fixed one: sampleThemeEvent dates events by it, and an occurred_at
// ahead of the receiving time by more than the source's bound is refused.
const RECEIVED_AT = new Date();
const BODY_LIMIT = 64 * 1024;
const options: PreflightOptions = { sources: new SourceDirectory(SOURCES), bodyLimitBytes: BODY_LIMIT };

interface Signed {
  headers: RequestHeaders;
  body: Buffer;
}

/** A request as node:http's headersDistinct presents it: lower-case names, one array per header. */
function signed(
  sourceId: string,
  event: unknown = sampleThemeEvent({ event_id: 'evt_1' }),
  tweak: {
    id?: string;
    timestamp?: number;
    secret?: string;
    scheme?: SignatureScheme;
    headers?: Record<string, string | string[] | undefined>;
    raw?: Buffer;
  } = {},
): Signed {
  const body = tweak.raw ?? Buffer.from(JSON.stringify(event));
  const source = SOURCES.find((s) => s.id === sourceId);
  const id = tweak.id ?? ((event as { event_id?: string }).event_id || 'evt_1');
  const signature = signWebhook({
    scheme: tweak.scheme ?? source?.scheme ?? 'hmac-sha256',
    secret: tweak.secret ?? SECRET_OF[sourceId] ?? 'not-a-secret-anyone-configured',
    body,
    id,
    timestamp: tweak.timestamp ?? NOW,
  });
  const all: Record<string, string | string[] | undefined> = { ...signature, 'content-length': String(body.length), ...tweak.headers };
  const headers: Record<string, string[]> = {};
  for (const [name, value] of Object.entries(all))
    if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value : [value];
  return { headers, body };
}

class RecordingPublisher implements EventPublisher {
  readonly records: PublishRecord[] = [];
  constructor(private readonly failure?: Error) {}
  async publish(record: PublishRecord): Promise<void> {
    if (this.failure) throw this.failure;
    this.records.push(record);
  }
}

const covered = new Set<RejectionKind>();
// One set of metrics per registry a test passes in, so several runs add to the same counters.
const runMetrics = new WeakMap<Registry, IngressMetrics>();

interface Run {
  answer: Answer;
  rejection: Rejection | undefined;
  metrics: IngressMetrics;
  registry: Registry;
}

/** What WebhookHandler does, minus the socket: every step in order, the first rejection answered. */
async function run(
  sourceId: string,
  request: Signed,
  publisher: EventPublisher = new RecordingPublisher(),
  closing = false,
  setup: { options?: PreflightOptions; limiter?: SourceLimiter; registry?: Registry } = {},
): Promise<Run> {
  const registry = setup.registry ?? new Registry();
  const metrics = setup.registry && runMetrics.has(setup.registry) ? runMetrics.get(setup.registry)! : createIngressMetrics(registry);
  runMetrics.set(registry, metrics);
  const preflightOptions = setup.options ?? options;
  const done = (rejection: Rejection | undefined, answer: Answer): Run => {
    if (rejection) {
      covered.add(rejection.kind);
      countRejection(metrics, rejection, preflightOptions.sources.label(sourceId));
    }
    return { answer, rejection, metrics, registry };
  };
  const delivery = preflight(preflightOptions, sourceId, request.headers, false, closing);
  if ('kind' in delivery) return done(delivery, rejectionAnswer(delivery));
  const verified = verify(delivery, request.body, clock, metrics);
  if ('kind' in verified) return done(verified, rejectionAnswer(verified));
  const limited = setup.limiter?.take(delivery.source, request.body.length);
  if (limited) return done(limited, rejectionAnswer(limited));
  const event = parseAndMatch(delivery, verified, request.body, RECEIVED_AT, { maxDepth: 32 });
  if ('kind' in event) return done(event, rejectionAnswer(event));
  const refused = await publish(publisher, event, request.body);
  return done(refused, refused ? rejectionAnswer(refused) : acceptedAnswer(event));
}

function delivered(sourceId: string, request: Signed): Delivery {
  const delivery = preflight(options, sourceId, request.headers, true, false);
  if ('kind' in delivery) throw new Error(`preflight refused: ${delivery.kind}`);
  return delivery;
}

function verified(delivery: Delivery, body: Buffer): VerifiedSignature {
  const result = verify(delivery, body, clock, createIngressMetrics(new Registry()));
  if ('kind' in result) throw new Error(`verify refused: ${result.kind}`);
  return result;
}

/** A counter's values by their label values joined with `|`; for a histogram, its observation counts. */
async function counter(registry: Registry, name: string): Promise<Record<string, number>> {
  const histogram = name.endsWith('_count');
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === (histogram ? name.slice(0, -'_count'.length) : name));
  const values = (metric?.values ?? []).filter((v) => !histogram || (v as { metricName?: string }).metricName === name);
  return Object.fromEntries(values.map((v) => [Object.values(v.labels).join('|'), v.value]));
}

const json = (answer: Answer) => JSON.parse(answer.body) as { error?: string; message?: string; status?: string; event_id?: string };

describe('accepted', () => {
  it('publishes the raw bytes keyed by resource, with the event headers in their order, and answers 202', async () => {
    const publisher = new RecordingPublisher();
    const event = sampleThemeEvent({ event_id: 'evt_ok', idempotency_key: 'theme:x:v1' });
    const request = signed('demo', event, {
      headers: { 'x-webhook-retry': '3', 'x-webhook-event': 'theme.updated', 'x-idempotency-key': 'theme:x:v1' },
    });
    const { answer, rejection, registry } = await run('demo', request, publisher);
    expect(rejection).toBeUndefined();
    expect(answer).toMatchObject({ status: 202, reason: 'accepted', retryAfter: false, closeConnection: false });
    expect(json(answer)).toEqual({ status: 'accepted', event_id: 'evt_ok' });
    expect(answer.event).toMatchObject({
      eventId: 'evt_ok',
      tenant: 'tenant_acme',
      resource: `tenant_acme/theme/${event.resource.id}`,
      typeLabel: 'theme.updated',
      deliveryAttempt: 3,
    });
    const [record] = publisher.records;
    expect(record!.key).toBe(`tenant_acme/theme/${event.resource.id}`);
    expect(record!.value).toBe(request.body);
    expect(Object.entries(record!.headers)).toEqual([
      ['event-id', 'evt_ok'],
      ['source', 'demo'],
      ['received-at', RECEIVED_AT.toISOString()],
      ['secret-id', 'demo-2026-01'],
      ['body-sha256', answer.bodySha256],
      ['event-type', 'theme.updated'],
      ['idempotency-key', 'theme:x:v1'],
      ['delivery-attempt', '3'],
    ]);
    expect(await counter(registry, 'webhook_signature_verifications_total')).toEqual({ 'demo|demo-2026-01': 1 });
    expect(await counter(registry, 'webhook_clock_skew_seconds_count')).toEqual({ demo: 1 });
  });

  it.each([
    ['demo-std', contractExampleEvent()],
    ['demo-body', sampleThemeEvent({ event_id: 'evt_body' })],
    ['demo-strict', contractExampleEvent()],
  ])('accepts what %s signs with its own scheme', async (sourceId, event) => {
    const { answer } = await run(sourceId, signed(sourceId, event));
    expect(answer.status).toBe(202);
  });

  it('takes the id from X-Webhook-Event-Id, the contract spelling, when X-Webhook-Id is absent', async () => {
    const request = signed('demo', sampleThemeEvent({ event_id: 'evt_alias' }), {
      headers: { 'x-webhook-id': undefined, 'x-webhook-event-id': 'evt_alias' },
    });
    expect((await run('demo', request)).answer.status).toBe(202);
  });

  it('answers with no-store JSON, and Retry-After and Connection: close where the answer says so', () => {
    const accepted = acceptedAnswer({ eventId: 'e' } as never);
    expect(answerHeaders(accepted, '5', false)).toEqual({ 'content-type': 'application/json', 'cache-control': 'no-store' });
    expect(answerHeaders(accepted, '5', true)).toEqual({
      'content-type': 'application/json',
      'cache-control': 'no-store',
      connection: 'close',
    });
    expect(answerHeaders(rejectionAnswer({ kind: 'inflight_body_bytes' }), '7', false)).toEqual({
      'content-type': 'application/json',
      'cache-control': 'no-store',
      'retry-after': '7',
      connection: 'close',
    });
  });
});

describe('preflight', () => {
  it('refuses everything while shutting down, before looking at the request', async () => {
    const { answer } = await run('demo', signed('demo'), undefined, true);
    expect(answer).toMatchObject({ status: 503, reason: 'shutting_down', retryAfter: true, closeConnection: true });
    expect(json(answer)).toEqual({ error: 'unavailable' });
  });

  it('answers every id 503 with Retry-After until sources are loaded, then serves each set replace() gives', async () => {
    const directory = new SourceDirectory([], { loaded: false });
    const setup = { options: { sources: directory, bodyLimitBytes: BODY_LIMIT } };
    for (const id of ['demo', 'nobody']) {
      const { answer } = await run(id, signed(id), undefined, false, setup);
      expect(answer).toMatchObject({ status: 503, reason: 'sources_not_loaded', retryAfter: true, closeConnection: false });
      expect(json(answer)).toEqual({ error: 'unavailable' });
    }
    directory.replace(SOURCES);
    expect((await run('demo', signed('demo'), undefined, false, setup)).answer.status).toBe(202);
    // A request past lookup keeps its source; the next one sees the new set.
    const inFlight = delivered('demo', signed('demo'));
    directory.replace(SOURCES.filter((s) => s.id !== 'demo'));
    expect(inFlight.source.id).toBe('demo');
    expect((await run('demo', signed('demo'), undefined, false, setup)).answer).toMatchObject({ status: 401, reason: 'unknown_source' });
    expect(directory.label('demo')).toBe('unknown');
    expect((await run('demo-std', signed('demo-std'), undefined, false, setup)).answer.status).toBe(202);
  });

  it('refuses a declared body over the limit, and closes the connection', async () => {
    const { answer } = await run('demo', signed('demo', undefined, { headers: { 'content-length': String(BODY_LIMIT + 1) } }));
    expect(answer).toMatchObject({ status: 413, reason: 'body_too_large', closeConnection: true });
    expect(json(answer)).toEqual({ error: 'payload_too_large' });
  });

  it('refuses a content type other than JSON; the connection closes only when the unread body has no bounded length', async () => {
    const bounded = await run('demo', signed('demo', undefined, { headers: { 'content-type': 'text/plain' } }));
    expect(bounded.answer).toMatchObject({ status: 415, reason: 'unsupported_media_type', closeConnection: false });
    expect(json(bounded.answer)).toEqual({ error: 'unsupported_media_type' });
    const chunked = await run(
      'demo',
      signed('demo', undefined, { headers: { 'content-type': 'text/plain', 'content-length': undefined } }),
    );
    expect(chunked.answer.closeConnection).toBe(true);
    const complete = preflight(
      options,
      'demo',
      signed('demo', undefined, { headers: { 'content-type': 'text/plain', 'content-length': undefined } }).headers,
      true,
      false,
    );
    expect(rejectionAnswer(complete as Rejection).closeConnection).toBe(false);
  });

  it.each([
    ['demo', 'x-webhook-id'],
    ['demo', 'x-webhook-signature'],
    ['demo-std', 'webhook-timestamp'],
    ['demo-body', 'x-webhook-signature'],
  ])('%s: a missing %s is a 400 counted as a signature failure', async (sourceId, header) => {
    const { answer, registry } = await run(sourceId, signed(sourceId, undefined, { headers: { [header]: undefined } }));
    expect(answer).toMatchObject({ status: 400, reason: 'missing_header' });
    expect(json(answer)).toEqual({ error: 'bad_request', message: `missing header: ${header}` });
    expect(await counter(registry, 'webhook_signature_failures_total')).toEqual({ [`${sourceId}|missing_header`]: 1 });
  });

  it("another scheme's complete headers are refused by verify like a bad signature (401), whatever the source", async () => {
    // Without its timestamp an hmac-sha256 request is a complete hmac-sha256-body one: a 400 here
    // and a 401 from demo-body would tell which ids are configured with which scheme.
    const request = signed('demo', undefined, { headers: { 'x-webhook-timestamp': undefined } });
    const { answer, rejection, registry } = await run('demo', request);
    expect(rejection?.kind).toBe('signature_missing_header');
    expect(answer).toMatchObject({ status: 401, reason: 'missing_header' });
    expect(json(answer)).toEqual({ error: 'unauthorized' });
    expect(await counter(registry, 'webhook_signature_failures_total')).toEqual({ 'demo|missing_header': 1 });
    expect((await run('nobody', request)).answer).toMatchObject({ status: 401, body: answer.body });
    expect((await run('demo-std', signed('demo'))).answer).toMatchObject({ status: 401, reason: 'missing_header', body: answer.body });
    // The same work as for an unknown id: the stand-in's checks and its HMAC over the body.
    const delivery = preflight(options, 'demo-std', signed('demo').headers, true, false);
    expect(delivery).toMatchObject({ known: true, otherScheme: true });
    expect((delivery as Delivery).source).toBe(options.sources.unknown);
  });

  it('an empty required header counts as missing', async () => {
    const { answer } = await run('demo', signed('demo', undefined, { headers: { 'x-webhook-signature': '' } }));
    expect(json(answer)).toEqual({ error: 'bad_request', message: 'missing header: x-webhook-signature' });
  });

  it('a repeated required header is a 400 counted as a signature failure', async () => {
    const { answer, registry } = await run('demo', signed('demo', undefined, { headers: { 'x-webhook-id': ['evt_1', 'evt_1'] } }));
    expect(answer).toMatchObject({ status: 400, reason: 'repeated_header' });
    expect(json(answer)).toEqual({ error: 'bad_request', message: 'repeated header: x-webhook-id' });
    expect(await counter(registry, 'webhook_signature_failures_total')).toEqual({ 'demo|repeated_header': 1 });
  });

  it('a repeated optional header is a 400 not counted as a signature failure', async () => {
    const { answer, rejection, registry } = await run('demo', signed('demo', undefined, { headers: { 'x-idempotency-key': ['a', 'b'] } }));
    expect(rejection?.kind).toBe('repeated_optional_header');
    expect(answer).toMatchObject({ status: 400, reason: 'repeated_header' });
    expect(json(answer)).toEqual({ error: 'bad_request', message: 'repeated header' });
    expect(await counter(registry, 'webhook_signature_failures_total')).toEqual({});
  });

  it('refuses both id spellings with different values', async () => {
    const { answer } = await run('demo', signed('demo', undefined, { headers: { 'x-webhook-event-id': 'evt_other' } }));
    expect(answer).toMatchObject({ status: 400, reason: 'event_id_mismatch' });
    expect(json(answer)).toEqual({ error: 'event_id_mismatch', message: 'x-webhook-id and x-webhook-event-id differ' });
  });

  it.each(['abc', '-1', '1.5', '1234567890'])('refuses X-Webhook-Retry %j', async (value) => {
    const { answer } = await run('demo', signed('demo', undefined, { headers: { 'x-webhook-retry': value } }));
    expect(answer).toMatchObject({ status: 400, reason: 'malformed_retry_header' });
    expect(json(answer)).toEqual({ error: 'bad_request', message: 'x-webhook-retry must be a non-negative integer' });
  });

  it.each([
    ['demo', 'soon'],
    ['demo', '2026-09-21T12:00:00'],
    ['demo-std', '2026-09-21T12:00:00Z'],
    ['nobody', 'soon'],
  ])("%s: refuses the timestamp %j (in none of the scheme's forms) with 400, before the body", async (source, timestamp) => {
    const header = source === 'demo-std' ? 'webhook-timestamp' : 'x-webhook-timestamp';
    const { answer, rejection, registry } = await run(source, signed(source, undefined, { headers: { [header]: timestamp } }));
    expect(rejection?.kind).toBe('malformed_timestamp');
    expect(answer).toMatchObject({ status: 400, reason: 'malformed_timestamp' });
    const forms = source === 'demo-std' ? 'unix seconds' : 'unix seconds or an ISO-8601 time with Z or an offset';
    expect(json(answer)).toEqual({ error: 'bad_request', message: `${header} must be ${forms}` });
    expect(await counter(registry, 'webhook_signature_failures_total')).toEqual({
      [`${source === 'nobody' ? 'unknown' : source}|malformed_timestamp`]: 1,
    });
  });

  it('verify answers a malformed timestamp it is handed (preflight refuses it first) with the same 400', () => {
    const answer = rejectionAnswer({ kind: 'signature_malformed_timestamp' });
    covered.add('signature_malformed_timestamp');
    expect(answer).toMatchObject({ status: 400, reason: 'malformed_timestamp', body: '{"error":"bad_request"}' });
  });

  it('answers a body read that ran over the limit, the budget or a deadline, and nobody when the client left', async () => {
    const tooLarge = bodyRejection({ kind: 'too_large' })!;
    covered.add(tooLarge.kind);
    expect(rejectionAnswer(tooLarge)).toMatchObject({ status: 413, reason: 'body_too_large', closeConnection: true });

    const overBudget = bodyRejection({ kind: 'over_budget' })!;
    covered.add(overBudget.kind);
    expect(rejectionAnswer(overBudget)).toMatchObject({
      status: 503,
      reason: 'inflight_body_bytes',
      retryAfter: true,
      closeConnection: true,
    });
    expect(json(rejectionAnswer(overBudget))).toEqual({ error: 'unavailable' });
    const registry = new Registry();
    const metrics = createIngressMetrics(registry);
    countRejection(metrics, overBudget, 'demo');

    for (const [read, reason, status] of [
      ['client_over_budget', 'client_body_bytes', 429],
      ['idle_timeout', 'body_idle_timeout', 408],
      ['timeout', 'body_timeout', 408],
    ] as const) {
      const refused = bodyRejection({ kind: read })!;
      covered.add(refused.kind);
      expect(rejectionAnswer(refused)).toMatchObject({ status, reason, closeConnection: true, retryAfter: status === 429 });
      countRejection(metrics, refused, 'demo');
    }
    expect(await counter(registry, 'webhook_overload_refusals_total')).toEqual({
      inflight_body_bytes: 1,
      client_body_bytes: 1,
      body_idle_timeout: 1,
      body_timeout: 1,
    });

    expect(bodyRejection({ kind: 'aborted' })).toBeUndefined();
  });
});

describe('verify', () => {
  it('answers an unknown source like a bad signature, after the same work', async () => {
    const { answer, registry } = await run('nobody', signed('nobody'));
    expect(answer).toMatchObject({ status: 401, reason: 'unknown_source' });
    expect(json(answer)).toEqual({ error: 'unauthorized' });
    expect(await counter(registry, 'webhook_signature_failures_total')).toEqual({ 'unknown|unknown_source': 1 });
    // Even signed with the secret of a configured source.
    expect((await run('nobody', signed('nobody', undefined, { secret: SECRETS.DEMO_SECRET }))).answer.reason).toBe('unknown_source');
  });

  it.each([
    ['signature_timestamp_out_of_window', 'timestamp_out_of_window', { timestamp: NOW - 301 }],
    ['signature_malformed_signature', 'malformed_signature', { headers: { 'x-webhook-signature': 'v1=zz' } }],
    ['signature_no_matching_signature', 'no_matching_signature', { secret: 'another-long-enough-secret' }],
  ] as const)('%s: 401, the reason only in metrics and logs', async (kind, reason, tweak) => {
    const { answer, rejection, registry } = await run('demo', signed('demo', undefined, tweak));
    expect(rejection?.kind).toBe(kind);
    expect(answer).toMatchObject({ status: 401, reason, retryAfter: false, closeConnection: false });
    expect(json(answer)).toEqual({ error: 'unauthorized' });
    expect(await counter(registry, 'webhook_signature_failures_total')).toEqual({ [`demo|${reason}`]: 1 });
  });

  it('a secret past its retireAfter no longer verifies: 401, counted as secret_retired; until then it verifies', async () => {
    const demo = SOURCES.find((s) => s.id === 'demo')!;
    const rotating = (retireAfterSeconds: number) => ({
      options: {
        sources: new SourceDirectory([
          {
            ...demo,
            secrets: [
              { id: 'old', value: SECRETS.DEMO_SECRET, retireAfter: new Date(retireAfterSeconds * 1000) },
              { id: 'new', value: 'the-next-long-enough-hmac-secret' },
            ],
          },
        ]),
        bodyLimitBytes: BODY_LIMIT,
      },
    });
    const before = await run('demo', signed('demo'), undefined, false, rotating(NOW + 1));
    expect(before.answer.status).toBe(202);
    expect(await counter(before.registry, 'webhook_signature_verifications_total')).toEqual({ 'demo|old': 1 });
    const after = await run('demo', signed('demo'), undefined, false, rotating(NOW));
    expect(after.rejection?.kind).toBe('signature_secret_retired');
    expect(after.answer).toMatchObject({ status: 401, reason: 'secret_retired' });
    expect(json(after.answer)).toEqual({ error: 'unauthorized' });
    expect(await counter(after.registry, 'webhook_signature_failures_total')).toEqual({ 'demo|secret_retired': 1 });
    const next = await run(
      'demo',
      signed('demo', undefined, { secret: 'the-next-long-enough-hmac-secret' }),
      undefined,
      false,
      rotating(NOW),
    );
    expect(await counter(next.registry, 'webhook_signature_verifications_total')).toEqual({ 'demo|new': 1 });
  });

  it('observes the clock skew of a known source, also when the timestamp is out of the window', async () => {
    const { registry } = await run('demo', signed('demo', undefined, { timestamp: NOW - 301 }));
    expect(await counter(registry, 'webhook_clock_skew_seconds_count')).toEqual({ demo: 1 });
  });

  it('refuses a delivery without a signature (preflight refuses it first; verify does not rely on that)', () => {
    const request = signed('demo');
    const rejection = verify({ ...delivered('demo', request), signature: '' }, request.body, clock, createIngressMetrics(new Registry()));
    expect(rejection).toEqual({ kind: 'signature_missing_header' });
    covered.add('signature_missing_header');
    expect(rejectionAnswer(rejection as Rejection)).toMatchObject({
      status: 401,
      reason: 'missing_header',
      body: '{"error":"unauthorized"}',
    });
  });
});

describe('parse and match', () => {
  const deep = (levels: number): unknown => (levels === 0 ? 1 : { a: deep(levels - 1) });
  it.each([
    ['invalid_utf8', 400, Buffer.from([0x7b, 0xff, 0x7d])],
    ['invalid_json', 400, Buffer.from('{"event_id":')],
    ['too_deep', 400, Buffer.from(JSON.stringify(sampleThemeEvent({ event_id: 'evt_1', data: deep(40) as never })))],
    ['forbidden_key', 400, Buffer.from('{"event_id":"evt_1","constructor":{}}')],
    ['invalid_string', 422, Buffer.from(JSON.stringify(sampleThemeEvent({ event_id: 'evt_1', tenant_id: 'tenant_\u0000' })))],
    ['unknown_event_version', 422, Buffer.from(JSON.stringify(sampleThemeEvent({ event_id: 'evt_1', event_version: 2 as never })))],
    ['invalid_envelope', 422, Buffer.from(JSON.stringify({ ...sampleThemeEvent({ event_id: 'evt_1' }), occurred_at: 'yesterday' }))],
    ['invalid_data', 422, Buffer.from(JSON.stringify(sampleThemeEvent({ event_id: 'evt_1', event_type: 'theme.deleted' })))],
  ] as const)('%s: %i with the parser message and the body digest', async (code, status, raw) => {
    const { answer, rejection } = await run('demo', signed('demo', undefined, { raw, id: 'evt_1' }));
    expect(rejection?.kind).toBe(code);
    expect(answer).toMatchObject({ status, reason: code, event: undefined });
    expect(json(answer)).toEqual({ error: code, message: (rejection as { message: string }).message });
    expect(answer.bodySha256).toMatch(/^[0-9a-f]{64}$/);
  });

  const mismatches: Array<[RejectionKind, number, SampleThemeEventOverrides, Record<string, string>, string, string]> = [
    ['event_id_mismatch', 400, { event_id: 'evt_body' }, {}, 'event_id_mismatch', 'x-webhook-id must equal event_id'],
    [
      'event_type_mismatch',
      400,
      {},
      { 'x-webhook-event': 'theme.deleted' },
      'event_type_mismatch',
      'x-webhook-event must equal event_type',
    ],
    [
      'idempotency_key_mismatch',
      400,
      { idempotency_key: 'k1' },
      { 'x-idempotency-key': 'k2' },
      'idempotency_key_mismatch',
      'x-idempotency-key must equal idempotency_key',
    ],
    ['tenant_not_allowed', 403, { tenant_id: 'tenant_other' }, {}, 'forbidden', 'source may not publish for this tenant'],
  ];
  it.each(mismatches)('%s: %i', async (kind, status, overrides, headers, code, message) => {
    const request = signed('demo', sampleThemeEvent({ event_id: 'evt_1', ...overrides }), { id: 'evt_1', headers });
    const { answer, rejection } = await run('demo', request);
    expect(rejection?.kind).toBe(kind);
    expect(answer).toMatchObject({ status, reason: kind, closeConnection: false });
    expect(json(answer)).toEqual({ error: code, message });
    // Known from the envelope: the request line names the event.
    expect(answer.event).toMatchObject({ tenant: overrides.tenant_id ?? 'tenant_acme', typeLabel: 'theme.updated' });
    expect(answer.bodySha256).toBe(answer.event!.bodySha256);
  });

  it('an envelope without resource.version: 422 where the type is ordered by version (the default)', async () => {
    const event = sampleThemeEvent({ event_id: 'evt_1' }) as ReceivedEnvelope;
    delete event.resource.version;
    for (const source of ['demo', 'demo-time']) {
      // demo-time orders theme by occurred_at but palette by version (for a tenant of its own: demo orders theme by version).
      const body =
        source === 'demo'
          ? event
          : { ...event, tenant_id: 'tenant_acme_time', event_type: 'palette.updated', resource: { ...event.resource, type: 'palette' } };
      const { answer, rejection } = await run(source, signed(source, body));
      expect(rejection?.kind).toBe('invalid_envelope');
      expect(answer).toMatchObject({ status: 422, reason: 'invalid_envelope' });
      expect(json(answer)).toMatchObject({
        message: expect.stringMatching(/^resource\.version: required \(source orders "(theme|palette)" by version\)$/),
      });
    }
  });

  it('a type the source orders by occurred_at: accepted with or without a version, and the record says ordered-by', async () => {
    for (const withVersion of [false, true]) {
      const event = sampleThemeEvent({ event_id: `evt_${String(withVersion)}`, tenant_id: 'tenant_acme_time' }) as ReceivedEnvelope;
      if (!withVersion) delete event.resource.version;
      const publisher = new RecordingPublisher();
      const { answer } = await run('demo-time', signed('demo-time', event), publisher);
      expect(answer.status).toBe(202);
      expect(publisher.records[0]!.headers).toMatchObject({ 'ordered-by': 'occurred_at' });
    }
    const versioned = new RecordingPublisher();
    await run('demo', signed('demo'), versioned);
    expect(versioned.records[0]!.headers).not.toHaveProperty('ordered-by');
  });

  it('an occurred_at ahead of the receiving time by more than the bound: 422 with both times and the bound, counted', async () => {
    const ahead = (s: number) => new Date(RECEIVED_AT.getTime() + s * 1000).toISOString();
    const event = sampleThemeEvent({ event_id: 'evt_1', occurred_at: ahead(301) });
    const { answer, registry } = await run('demo', signed('demo', event));
    expect(answer).toMatchObject({ status: 422, reason: 'occurred_at_in_future' });
    expect(json(answer)).toEqual({
      error: 'occurred_at_in_future',
      message:
        `occurred_at ${event.occurred_at} is 301 s ahead of the receiving clock (${RECEIVED_AT.toISOString()}); ` +
        'at most 300 s ahead is accepted: correct the sending clock, then send the event again',
    });
    expect(answer.event?.typeLabel).toBe('theme.updated');
    expect(await counter(registry, 'webhook_event_refusals_total')).toEqual({ 'demo|occurred_at_in_future': 1 });
    // At the bound, and for a type ordered by occurred_at too.
    expect((await run('demo', signed('demo', sampleThemeEvent({ event_id: 'evt_1', occurred_at: ahead(300) })))).answer.status).toBe(202);
    const timeOrdered = await run(
      'demo-time',
      signed('demo-time', sampleThemeEvent({ event_id: 'evt_1', tenant_id: 'tenant_acme_time', occurred_at: '2062-01-01T00:00:00Z' })),
    );
    expect(timeOrdered.answer).toMatchObject({ status: 422, reason: 'occurred_at_in_future' });
  });

  it('a resource type the source does not publish: 422, and its event type never becomes a label', async () => {
    const request = signed(
      'demo-std',
      sampleThemeEvent({ event_id: 'evt_1', event_type: 'palette.updated', resource: { type: 'palette' }, data: {} }),
    );
    const { answer } = await run('demo-std', request);
    expect(answer).toMatchObject({ status: 422, reason: 'resource_type_not_allowed' });
    expect(json(answer)).toEqual({
      error: 'resource_type_not_allowed',
      message: 'resource type "palette" is not one this source publishes (theme)',
    });
    expect(answer.event?.typeLabel).toBeUndefined();
  });

  it('a source with a strict schema refuses a snapshot that breaks it (invalid_data, reason strict_schema)', async () => {
    const event = contractExampleEvent();
    const request = signed('demo-strict', { ...event, data: { ...event.data, extra: true } });
    const { answer } = await run('demo-strict', request);
    expect(answer).toMatchObject({ status: 422, reason: 'strict_schema' });
    expect(json(answer).error).toBe('invalid_data');
    expect(json(answer).message).toMatch(/additional properties/);
    // A delete carries no snapshot to police.
    const deleted = { ...event, event_type: 'theme.deleted', data: {} };
    expect((await run('demo-strict', signed('demo-strict', deleted))).answer.status).toBe(202);
  });

  it('parses with the configured depth limit', () => {
    const request = signed('demo', sampleThemeEvent({ event_id: 'evt_1', data: deep(3) as never }));
    const delivery = delivered('demo', request);
    const result = parseAndMatch(delivery, verified(delivery, request.body), request.body, RECEIVED_AT, { maxDepth: 2 });
    expect(result).toMatchObject({ kind: 'too_deep' });
  });

  it('keeps nothing of the parsed tree while the event waits for its ack: the heap holds ids, not the body as objects', () => {
    // A body of small objects parses into several times its size on the heap, and the ingress keeps
    // MatchedEvents of up to MAX_INFLIGHT_BODY_BYTES of bodies while they wait for acks: holding their
    // trees took one ingress to 1.1 GB RSS with 128 concurrent 860 KiB webhooks.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    // 100 bodies of ~60 KiB (this file's body limit is 64 KiB).
    const swatches = Array.from({ length: 2_600 }, (_, j) => ({ c: j, w: [j, 1] }));
    const requests = Array.from({ length: 100 }, (_, i) =>
      signed('demo', sampleThemeEvent({ event_id: `evt_big_${i}`, data: { name: 'big', swatches } as never })),
    );
    const bodyBytes = requests.reduce((sum, r) => sum + r.body.length, 0);
    const checked = requests.map((request) => {
      const delivery = delivered('demo', request);
      return { delivery, signature: verified(delivery, request.body), body: request.body };
    });
    gc();
    const before = process.memoryUsage().heapUsed;
    const waiting = checked.map((c) => parseAndMatch(c.delivery, c.signature, c.body, RECEIVED_AT, { maxDepth: 32 }));
    gc();
    const held = process.memoryUsage().heapUsed - before;
    expect(waiting.every((e) => !('kind' in e))).toBe(true);
    expect(held, `${(held / 2 ** 20).toFixed(1)} MiB held for ${(bodyBytes / 2 ** 20).toFixed(1)} MiB of bodies`).toBeLessThan(
      bodyBytes / 4,
    );
  });
});

describe('per-source limits', () => {
  const demo = SOURCES.find((s) => s.id === 'demo')!;
  const limitedTo = (limits: NonNullable<(typeof demo)['limits']>) => ({
    sources: new SourceDirectory([{ ...demo, limits }]),
    bodyLimitBytes: BODY_LIMIT,
  });

  it('requests per second: a burst of one second, then 429 with Retry-After until a token is back; counted', async () => {
    let nowMs = 0;
    const limiter = new SourceLimiter(BODY_LIMIT, () => nowMs);
    const registry = new Registry();
    const setup = { options: limitedTo({ requestsPerSecond: 2 }), limiter, registry };
    expect((await run('demo', signed('demo'), undefined, false, setup)).answer.status).toBe(202);
    expect((await run('demo', signed('demo'), undefined, false, setup)).answer.status).toBe(202);
    const { answer, rejection } = await run('demo', signed('demo'), undefined, false, setup);
    expect(rejection).toEqual({ kind: 'source_rate_limited', limit: 'requests', retryAfterSeconds: 1 });
    expect(answer).toMatchObject({ status: 429, reason: 'source_rate_limited', retryAfter: true });
    expect(json(answer)).toEqual({
      error: 'source_rate_limited',
      message: 'this source is over its requests per second on this ingress; retry after 1 s',
    });
    expect(answerHeaders(answer, '5', false)['retry-after']).toBe('1');
    expect(await counter(registry, 'webhook_source_limited_total')).toEqual({ 'demo|requests': 1 });
    nowMs = 499;
    expect((await run('demo', signed('demo'), undefined, false, setup)).answer.status).toBe(429);
    nowMs = 500;
    expect((await run('demo', signed('demo'), undefined, false, setup)).answer.status).toBe(202);
    expect(await counter(registry, 'webhook_source_limited_total')).toEqual({ 'demo|requests': 2 });
  });

  it('a slow rate: Retry-After is the whole seconds until the next token', () => {
    let nowMs = 0;
    const limiter = new SourceLimiter(BODY_LIMIT, () => nowMs);
    const source = { ...demo, limits: { requestsPerSecond: 0.1 } };
    expect(limiter.take(source, 100)).toBeUndefined();
    expect(limiter.take(source, 100)).toMatchObject({ retryAfterSeconds: 10 });
    nowMs = 7_500;
    expect(limiter.take(source, 100)).toMatchObject({ retryAfterSeconds: 3 });
    nowMs = 10_000;
    expect(limiter.take(source, 100)).toBeUndefined();
  });

  it('bytes per second: the burst holds at least one body at the body limit; a refused request takes nothing', () => {
    let nowMs = 0;
    const limiter = new SourceLimiter(4096, () => nowMs);
    const source = { ...demo, limits: { bytesPerSecond: 1024, requestsPerSecond: 100 } };
    expect(limiter.take(source, 4096)).toBeUndefined();
    expect(limiter.take(source, 512)).toEqual({ kind: 'source_rate_limited', limit: 'bytes', retryAfterSeconds: 1 });
    nowMs = 250;
    expect(limiter.take(source, 512)).toEqual({ kind: 'source_rate_limited', limit: 'bytes', retryAfterSeconds: 1 });
    nowMs = 500;
    expect(limiter.take(source, 512)).toBeUndefined();
    expect(limiter.take(source, 3000)).toMatchObject({ limit: 'bytes', retryAfterSeconds: 3 });
    // A bytes rate above the body limit: a second's worth is the burst.
    const fast = { ...demo, id: 'fast', limits: { bytesPerSecond: 10_000 } };
    expect(limiter.take(fast, 4096)).toBeUndefined();
    expect(limiter.take(fast, 4096)).toBeUndefined();
    expect(limiter.take(fast, 4096)).toMatchObject({ limit: 'bytes' });
  });

  it('changed limits start from a full bucket; a source without limits is never limited', () => {
    const limiter = new SourceLimiter(BODY_LIMIT, () => 0);
    expect(limiter.take({ ...demo, limits: { requestsPerSecond: 1 } }, 10)).toBeUndefined();
    expect(limiter.take({ ...demo, limits: { requestsPerSecond: 1 } }, 10)).toMatchObject({ limit: 'requests' });
    expect(limiter.take({ ...demo, limits: { requestsPerSecond: 2 } }, 10)).toBeUndefined();
    limiter.retain(new Set());
    expect(limiter.take({ ...demo, limits: { requestsPerSecond: 2 } }, 10)).toBeUndefined();
    for (let i = 0; i < 100; i += 1) expect(limiter.take(demo, BODY_LIMIT)).toBeUndefined();
  });

  it('counts verified requests only: forged ones do not use up the budget', async () => {
    const limiter = new SourceLimiter(BODY_LIMIT, () => 0);
    const setup = { options: limitedTo({ requestsPerSecond: 1 }), limiter };
    for (let i = 0; i < 5; i += 1) {
      const forged = await run('demo', signed('demo', undefined, { secret: 'a-forger-s-long-enough-secret' }), undefined, false, setup);
      expect(forged.answer.status).toBe(401);
    }
    expect((await run('demo', signed('demo'), undefined, false, setup)).answer.status).toBe(202);
    expect((await run('demo', signed('demo'), undefined, false, setup)).answer.status).toBe(429);
  });
});

describe('publish', () => {
  it.each([
    ['record_too_large', 413, 'payload_too_large', false],
    ['broker_unavailable', 503, 'unavailable', true],
    ['ack_timeout', 503, 'unavailable', true],
    ['shutting_down', 503, 'unavailable', true],
  ] as const)('%s: %i %s', async (code: PublishErrorCode, status, error, retryAfter) => {
    const { answer, rejection } = await run('demo', signed('demo'), new RecordingPublisher(new PublishError(code, 'no')));
    expect(rejection?.kind).toBe(code);
    expect(answer).toMatchObject({ status, reason: code, retryAfter });
    expect(json(answer)).toEqual({ error });
    expect(answer.event?.eventId).toBe('evt_1');
  });

  it('throws what is not a PublishError (the handler answers 500 internal_error)', async () => {
    await expect(run('demo', signed('demo'), new RecordingPublisher(new TypeError('bug')))).rejects.toThrow('bug');
    const internal = rejectionAnswer({ kind: 'internal_error' });
    covered.add('internal_error');
    expect(internal).toMatchObject({
      status: 500,
      reason: 'internal_error',
      body: '{"error":"internal_error"}',
      event: undefined,
      bodySha256: undefined,
    });
  });
});

describe('the rejection table', () => {
  // The statuses and bodies the ingress answered before the pipeline had a table.
  const expected: Record<RejectionKind, [number, string]> = {
    shutting_down: [503, 'unavailable'],
    body_too_large: [413, 'payload_too_large'],
    unsupported_media_type: [415, 'unsupported_media_type'],
    missing_header: [400, 'bad_request'],
    repeated_header: [400, 'bad_request'],
    repeated_optional_header: [400, 'bad_request'],
    event_id_headers_differ: [400, 'event_id_mismatch'],
    malformed_retry_header: [400, 'bad_request'],
    malformed_timestamp: [400, 'bad_request'],
    inflight_body_bytes: [503, 'unavailable'],
    client_body_bytes: [429, 'too_many_requests'],
    body_idle_timeout: [408, 'request_timeout'],
    body_timeout: [408, 'request_timeout'],
    unknown_source: [401, 'unauthorized'],
    signature_missing_header: [401, 'unauthorized'],
    signature_malformed_timestamp: [400, 'bad_request'],
    signature_timestamp_out_of_window: [401, 'unauthorized'],
    signature_malformed_signature: [401, 'unauthorized'],
    signature_no_matching_signature: [401, 'unauthorized'],
    signature_secret_retired: [401, 'unauthorized'],
    sources_not_loaded: [503, 'unavailable'],
    source_rate_limited: [429, 'source_rate_limited'],
    invalid_utf8: [400, 'invalid_utf8'],
    invalid_json: [400, 'invalid_json'],
    too_deep: [400, 'too_deep'],
    forbidden_key: [400, 'forbidden_key'],
    invalid_string: [422, 'invalid_string'],
    unknown_event_version: [422, 'unknown_event_version'],
    invalid_envelope: [422, 'invalid_envelope'],
    invalid_data: [422, 'invalid_data'],
    event_id_mismatch: [400, 'event_id_mismatch'],
    event_type_mismatch: [400, 'event_type_mismatch'],
    idempotency_key_mismatch: [400, 'idempotency_key_mismatch'],
    resource_type_not_allowed: [422, 'resource_type_not_allowed'],
    tenant_not_allowed: [403, 'forbidden'],
    strict_schema: [422, 'invalid_data'],
    occurred_at_in_future: [422, 'occurred_at_in_future'],
    record_too_large: [413, 'payload_too_large'],
    broker_unavailable: [503, 'unavailable'],
    ack_timeout: [503, 'unavailable'],
    not_found: [404, 'not_found'],
    internal_error: [500, 'internal_error'],
  };

  it('answers every kind with the status and body code it had', () => {
    const table = Object.fromEntries(Object.entries(REJECTIONS).map(([kind, row]) => [kind, [row.status, row.code]]));
    expect(table).toEqual(expected);
    covered.add('not_found');
  });
});

afterAll(() => {
  // Every row is reached by a test above (not_found only through the table: express answers it).
  expect([...covered].sort()).toEqual(Object.keys(REJECTIONS).sort());
});
