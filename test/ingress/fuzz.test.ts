import { describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { topicRecordCount } from '../kit/kafka.ts';
import { HMAC_SECRET, post, send, signedRequest, STD_SECRET, useIngress } from '../kit/ingress.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20261129);
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 10_000);
const CONCURRENCY = 32;

/** mulberry32: small, seedable, good enough to pick mutations reproducibly. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Headers = Array<[string, string]>;
interface Fuzzed {
  path: string;
  headers: Headers;
  body: Buffer;
  chunked?: boolean;
  mutations: string[];
}

function buildCase(random: () => number): Fuzzed {
  const int = (n: number) => Math.floor(random() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const std = random() < 0.3;
  const scheme = std ? 'standard-webhooks' : 'hmac-sha256';
  const secret = std ? STD_SECRET : HMAC_SECRET;
  const source = std ? 'acme-std' : 'acme';
  // Ids from the seeded generator too, so a failing case can be rebuilt from the seed.
  const event = sampleThemeEvent({ event_id: `evt_fuzz_${int(1e12)}`, resource: { id: `theme_${int(50)}`, version: 1 + int(1e6) } });
  const names = std
    ? ['webhook-id', 'webhook-timestamp', 'webhook-signature']
    : ['x-webhook-id', 'x-webhook-timestamp', 'x-webhook-signature'];

  // Mutations that re-sign a bad body: the signature is valid, the content is not.
  const signedBodies: Array<[string, () => { body: Buffer; id?: string }]> = [
    [
      'signed-truncated',
      () => {
        const b = Buffer.from(JSON.stringify(event));
        return { body: b.subarray(0, int(b.length - 1)) };
      },
    ],
    [
      'signed-bad-utf8',
      () => {
        const b = Buffer.from(JSON.stringify(event));
        const at = 2 + int(b.length - 4);
        b[at] = pick([0xff, 0xc0, 0xfe, 0x80]);
        return { body: b };
      },
    ],
    [
      'signed-deep',
      () => {
        const d = 33 + int(2000);
        return { body: Buffer.from('{"a":'.repeat(d) + '1' + '}'.repeat(d)) };
      },
    ],
    [
      'signed-deep-array',
      () => {
        const d = 33 + int(5000);
        return { body: Buffer.from('['.repeat(d) + ']'.repeat(d)) };
      },
    ],
    [
      'signed-proto',
      () => ({
        body: Buffer.from(
          JSON.stringify(event).replace('"data":{', `"data":{"${pick(['__proto__', 'constructor', 'prototype'])}":{"polluted":true},`),
        ),
      }),
    ],
    ['signed-top-proto', () => ({ body: Buffer.from(JSON.stringify(event).replace('{', '{"__proto__":{"x":1},')) })],
    ['signed-duplicate-key', () => ({ body: Buffer.from(JSON.stringify(event).replace('{', `{"tenant_id":"tenant_other",`)) })],
    ['signed-version', () => ({ body: Buffer.from(JSON.stringify({ ...event, event_version: pick([0, 2, 99, '1', 1.5, null]) })) })],
    [
      'signed-tenant',
      () => ({ body: Buffer.from(JSON.stringify({ ...event, tenant_id: pick(['tenant_evil', 'tenant_ACME', '', 'a/b']) })) }),
    ],
    ['signed-id-mismatch', () => ({ body: Buffer.from(JSON.stringify(event)), id: `evt_${int(1e9)}` })],
    ['signed-garbage', () => ({ body: Buffer.from(Array.from({ length: int(300) }, () => int(256))) })],
    ['signed-empty', () => ({ body: Buffer.alloc(0) })],
    ['signed-not-object', () => ({ body: Buffer.from(pick(['[]', '1', '"x"', 'null', 'true', '{}'])) })],
    [
      'signed-missing-field',
      () => {
        const copy: Record<string, unknown> = { ...event };
        delete copy[pick(['event_id', 'event_type', 'occurred_at', 'tenant_id', 'resource', 'data'])];
        return { body: Buffer.from(JSON.stringify(copy)) };
      },
    ],
    ['signed-bom', () => ({ body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(event))]) })],
  ];

  const mutations: string[] = [];
  let body: Buffer = Buffer.from(JSON.stringify(event));
  let id = event.event_id;
  let timestamp = Math.floor(Date.now() / 1000);
  if (random() < 0.35) {
    const [name, make] = pick(signedBodies);
    const made = make();
    body = made.body;
    if (made.id) id = made.id;
    mutations.push(name);
  }
  if (random() < 0.1) {
    // Well outside the 300 s window, so a request sent late under load is still outside it.
    timestamp += pick([-1, 1]) * (400 + int(100_000));
    mutations.push('stale-timestamp');
  }
  let headers: Headers = Object.entries(signWebhook({ scheme, secret, body, id, timestamp }));
  let path = `/webhooks/${source}`;
  let chunked = false;

  // Mutations applied after signing: each alone makes the request invalid.
  const unsigned: Array<[string, () => void]> = [
    [
      'flip-body-byte',
      () => {
        const copy = Buffer.from(body.length === 0 ? Buffer.from('x') : body);
        const at = int(copy.length);
        copy[at] = copy[at]! ^ (1 << int(8));
        body = copy;
      },
    ],
    [
      'flip-signature',
      () => {
        headers = headers.map(([k, v]) => {
          if (k !== names[2]) return [k, v];
          // Not the last base64 digit before '=': its two padding bits do not reach the decoded MAC.
          const at = 3 + int(v.length - (std ? 5 : 3));
          const replacement = pick(['0', '1', 'a', 'Z', '+', '=', ' ', ',']);
          return [k, v.slice(0, at) + (v[at] === replacement ? '2' : replacement) + v.slice(at + 1)];
        });
      },
    ],
    [
      'drop-header',
      () => {
        const name = pick(names);
        headers = headers.filter(([k]) => k !== name);
      },
    ],
    [
      'duplicate-header',
      () => {
        const name = pick(names);
        const line = headers.find(([k]) => k === name);
        if (line) headers.push([name, pick([line[1], `${line[1]}x`])]);
        else headers.push([name, '1'], [name, '2']);
      },
    ],
    [
      'content-type',
      () => {
        const type = pick([
          'text/plain',
          'application/xml',
          'application/json; charset=latin1',
          'application/x-www-form-urlencoded',
          'application/jsonx',
          'multipart/form-data',
          '',
        ]);
        headers = headers.filter(([k]) => k !== 'content-type');
        if (type !== '' || random() < 0.5) headers.push(['content-type', type]);
      },
    ],
    ['two-content-types', () => headers.push(['content-type', 'application/json'], ['content-type', 'application/json'])],
    [
      'truncate',
      () => {
        body = body.subarray(0, int(Math.max(body.length - 1, 0)));
        if (body.length === 0) body = Buffer.from('{');
      },
    ],
    [
      'append',
      () => {
        body = Buffer.concat([body, Buffer.from(pick([' ', '\n', '}', 'x', '\u0000']))]);
      },
    ],
    [
      'wrong-source',
      () => {
        path = `/webhooks/${pick(['nope', 'ACME', 'acme%00', '..', 'acme-std2', 'demo'])}`;
      },
    ],
    [
      'wrong-scheme-headers',
      () => {
        headers = headers.map(([k, v]) => [k.startsWith('x-') ? k.slice(2) : `x-${k}`, v]);
      },
    ],
    [
      'huge',
      () => {
        body = Buffer.alloc(1024 * 1024 + 1 + int(100_000), 0x20);
        chunked = random() < 0.5;
      },
    ],
    [
      'other-secret',
      () => {
        headers = Object.entries(
          signWebhook({
            scheme,
            secret: std ? 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' : 'another-secret-of-enough-length',
            body,
            id,
            timestamp,
          }),
        );
      },
    ],
  ];
  const ordinaryUnsigned = unsigned.filter(([name]) => name !== 'huge');
  // Requests that are already invalid by a signed mutation may also carry more damage.
  const count = mutations.length > 0 ? int(3) : 1 + int(2);
  // Distinct mutations only: applying the same one twice could undo it (a rename there and back).
  const available = [...ordinaryUnsigned];
  for (let i = 0; i < count; i += 1) {
    const [name, apply] = random() < 0.002 ? unsigned.find(([n]) => n === 'huge')! : available.splice(int(available.length), 1)[0]!;
    apply();
    mutations.push(name);
  }
  return { path, headers, body, chunked, mutations };
}

describe('fuzzed malformed requests', () => {
  const {
    kafka,
    names: { events: topic },
    ingress,
  } = useIngress({ topics: { eventsPartitions: 3, retryLevels: 0 } });

  it(`answers only 4xx to ${REQUESTS} mutated requests (seed ${SEED}) and publishes nothing`, async () => {
    const random = prng(SEED);
    const statuses = new Map<number, number>();
    const unexpected: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < REQUESTS) {
        // Built when sent (in PRNG order, so the run is reproducible): timestamps stay fresh.
        const fuzzed = buildCase(random);
        next += 1;
        const headers: Headers = fuzzed.chunked ? [...fuzzed.headers, ['transfer-encoding', 'chunked']] : fuzzed.headers;
        try {
          const answer = await send(ingress.url, { path: fuzzed.path, headers, body: fuzzed.body });
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          if (answer.status < 400 || answer.status >= 500)
            unexpected.push(`${answer.status} after ${fuzzed.mutations.join('+')}: ${answer.body}`);
        } catch (error) {
          // A client still writing an over-limit body may see the socket closed after the 413.
          if (!fuzzed.mutations.includes('huge')) unexpected.push(`${(error as Error).message} after ${fuzzed.mutations.join('+')}`);
          statuses.set(-1, (statuses.get(-1) ?? 0) + 1);
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    console.log(`fuzz seed ${SEED}: statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
    expect(unexpected.slice(0, 20)).toEqual([]);
    expect([...statuses.values()].reduce((a, b) => a + b, 0)).toBe(REQUESTS);
    expect(await topicRecordCount(kafka, topic)).toBe(0);

    // Still alive and still correct after the storm.
    expect((await post(ingress.url, signedRequest())).status).toBe(202);
    expect(await topicRecordCount(kafka, topic)).toBe(1);
  });
});
