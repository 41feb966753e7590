import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SIGNATURE_HEADERS } from './schemes.ts';
import { signWebhook } from './sign-webhook.ts';
import { verifySignature } from './verify-signature.ts';
import type { VerifySignatureInput } from './verify-signature.ts';

const KAT = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: '1614265330',
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};
const KAT_NOW = 1614265330;

function verifyKat(overrides: Partial<VerifySignatureInput> = {}, headerOverrides: VerifySignatureInput['headers'] = {}) {
  return verifySignature({
    scheme: 'standard-webhooks',
    secrets: [{ id: 'std-1', value: KAT.secret }],
    headers: { id: KAT.id, timestamp: KAT.timestamp, signature: KAT.signature, ...headerOverrides },
    rawBody: Buffer.from(KAT.body),
    now: KAT_NOW,
    toleranceSeconds: 300,
    ...overrides,
  });
}

describe('verifySignature, standard-webhooks known-answer vector', () => {
  it('accepts the vector and reports the secret and skew', () => {
    expect(verifyKat({ now: KAT_NOW + 12 })).toEqual({
      ok: true,
      secretId: 'std-1',
      timestamp: 1614265330,
      clockSkewSeconds: 12,
    });
  });

  it('accepts the secret without the whsec_ prefix', () => {
    expect(verifyKat({ secrets: [{ id: 'bare', value: KAT.secret.slice('whsec_'.length) }] })).toMatchObject({
      ok: true,
      secretId: 'bare',
    });
  });

  it('rejects a wrong id', () => {
    expect(verifyKat({}, { id: 'msg_p5jXN8AQM9LWM0D4loKWxJeX' })).toEqual({
      ok: false,
      reason: 'no_matching_signature',
      clockSkewSeconds: 0,
    });
  });

  it('rejects a wrong timestamp inside the window', () => {
    expect(verifyKat({}, { timestamp: String(KAT_NOW + 1) })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
  });

  it('rejects an altered body', () => {
    expect(verifyKat({ rawBody: Buffer.from('{"test": 2432232315}') })).toMatchObject({
      ok: false,
      reason: 'no_matching_signature',
    });
  });

  it('rejects a body re-serialised with other whitespace', () => {
    const reserialised = JSON.stringify(JSON.parse(KAT.body));
    expect(reserialised).not.toBe(KAT.body);
    expect(verifyKat({ rawBody: Buffer.from(reserialised) })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
  });

  it('accepts the edges of the window and rejects beyond them, both directions', () => {
    expect(verifyKat({ now: KAT_NOW + 300 })).toMatchObject({ ok: true });
    expect(verifyKat({ now: KAT_NOW - 300 })).toMatchObject({ ok: true });
    expect(verifyKat({ now: KAT_NOW + 301 })).toEqual({
      ok: false,
      reason: 'timestamp_out_of_window',
      clockSkewSeconds: 301,
    });
    expect(verifyKat({ now: KAT_NOW - 301 })).toEqual({
      ok: false,
      reason: 'timestamp_out_of_window',
      clockSkewSeconds: -301,
    });
  });

  it('ignores unknown versions: v2 only does not verify', () => {
    expect(verifyKat({}, { signature: KAT.signature.replace('v1,', 'v2,') })).toEqual({
      ok: false,
      reason: 'no_matching_signature',
      clockSkewSeconds: 0,
    });
  });

  it('accepts several signatures when one is valid', () => {
    const other = 'v1,' + Buffer.alloc(32, 7).toString('base64');
    const v2 = 'v2,' + Buffer.alloc(32, 1).toString('base64');
    expect(verifyKat({}, { signature: `${v2} ${other} ${KAT.signature}` })).toMatchObject({ ok: true, secretId: 'std-1' });
    expect(verifyKat({}, { signature: `${KAT.signature} ${other}` })).toMatchObject({ ok: true });
  });

  it('does not accept the hex form of the other scheme', () => {
    const hex = Buffer.from(KAT.signature.slice(3), 'base64').toString('hex');
    expect(verifyKat({}, { signature: `v1=${hex}` })).toMatchObject({ ok: false, reason: 'malformed_signature' });
  });
});

describe('verifySignature, hmac-sha256', () => {
  const body = Buffer.from('{"event_id":"evt_1","tenant_id":"tenant_acme"}');
  const now = 1700000000;
  // printf '%s' '1700000000.{"event_id":"evt_1","tenant_id":"tenant_acme"}' \
  //   | openssl dgst -sha256 -hmac 'demo-secret-change-me'
  const signature = 'v1=54e96e0c71008e71336c8e3b33b5471875e6e7135daf8c566e532ed7d1813b54';

  function verify(overrides: Partial<VerifySignatureInput> = {}, headerOverrides: VerifySignatureInput['headers'] = {}) {
    return verifySignature({
      scheme: 'hmac-sha256',
      secrets: [{ id: 'demo-2024', value: 'demo-secret-change-me' }],
      headers: { id: 'evt_1', timestamp: String(now), signature, ...headerOverrides },
      rawBody: body,
      now,
      toleranceSeconds: 300,
      ...overrides,
    });
  }

  it('accepts the fixed vector', () => {
    expect(verify()).toEqual({ ok: true, secretId: 'demo-2024', timestamp: now, clockSkewSeconds: 0 });
  });

  it('accepts upper-case hex', () => {
    expect(verify({}, { signature: signature.toUpperCase().replace('V1=', 'v1=') })).toMatchObject({ ok: true });
  });

  it('does not sign the id: hmac-sha256 covers timestamp and body only', () => {
    expect(verify({}, { id: 'evt_other' })).toMatchObject({ ok: true });
  });

  it('rejects a body re-serialised with other whitespace', () => {
    const pretty = Buffer.from(JSON.stringify(JSON.parse(body.toString()), null, 2));
    expect(verify({ rawBody: pretty })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
  });

  it.each([
    ['id', { id: undefined }],
    ['timestamp', { timestamp: undefined }],
    ['signature', { signature: undefined }],
    ['empty signature', { signature: '' }],
  ])('reports a missing %s header', (_name, headers) => {
    expect(verify({}, headers)).toEqual({ ok: false, reason: 'missing_header' });
  });

  it.each(['abc', '-1700000000', '1700000000.5', ' 1700000000', '1e9', '1234567890123456'])(
    'reports a malformed timestamp %j',
    (timestamp) => {
      expect(verify({}, { timestamp })).toEqual({ ok: false, reason: 'malformed_timestamp' });
    },
  );

  it.each(['v1=zz', 'v1=' + 'a'.repeat(63), 'sha256=abc', '=abc', 'v1', '   ', Array(17).fill(signature).join(' ')])(
    'reports a malformed signature %j',
    (bad) => {
      expect(verify({}, { signature: bad })).toMatchObject({ ok: false, reason: 'malformed_signature' });
    },
  );

  it('ignores v2= entries', () => {
    expect(verify({}, { signature: `v2=${'0'.repeat(64)}` })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
    expect(verify({}, { signature: `v2=${'0'.repeat(64)} ${signature}` })).toMatchObject({ ok: true });
  });

  it('still verifies when a malformed entry sits beside a valid one', () => {
    expect(verify({}, { signature: `garbage ${signature}` })).toMatchObject({ ok: true });
  });

  it('never matches with an empty secret', () => {
    const signed = signWebhook({ scheme: 'hmac-sha256', secret: 'x', id: 'a', body, timestamp: now });
    expect(verify({ secrets: [{ id: 'empty', value: '' }] }, { signature: signed['x-webhook-signature'] })).toMatchObject({
      ok: false,
      reason: 'no_matching_signature',
    });
  });
});

// Seed 004's provider: X-Webhook-Signature is the bare hex HMAC-SHA256 of `${timestamp}.${raw body}`,
// and X-Webhook-Timestamp is unix seconds or an ISO-8601 time, signed exactly as sent. Each vector
// was computed with openssl, independently of the signing module:
//   printf '%s' "$TS.$BODY" | openssl dgst -sha256 -hmac 'demo-secret-change-me'
describe('verifySignature, hmac-sha256 as seed 004 sends it', () => {
  const body = Buffer.from('{"event_id":"evt_1","tenant_id":"tenant_acme"}');
  const now = 1700000000;
  const secrets = [{ id: 'demo-2024', value: 'demo-secret-change-me' }];
  const VECTORS = {
    '1700000000': '54e96e0c71008e71336c8e3b33b5471875e6e7135daf8c566e532ed7d1813b54',
    '2023-11-14T22:13:20Z': 'f1a3382e34858fe8b6e0a366dc6d4ce9c7f4a3fe225ca01d62ff9cdf5cd6b525',
    '2023-11-15T05:43:20+07:30': '2199cb2ad80c915b8abdf46dbe25bc5a2967e7e924a8d78f3451f31f40b4a2f4',
    '2023-11-14T22:13:20.123456Z': '1943fb9d72f78ff88eccc302b7141b5fa0e5fb6ca6e1f9869ac53acf0e090f2e',
  } as const;

  function verify(timestamp: string, signature: string, at = now) {
    return verifySignature({
      scheme: 'hmac-sha256',
      secrets,
      headers: { id: 'evt_1', timestamp, signature },
      rawBody: body,
      now: at,
      toleranceSeconds: 300,
    });
  }

  it('accepts the bare hex signature (no v1=), lower or upper case', () => {
    expect(verify('1700000000', VECTORS['1700000000'])).toEqual({ ok: true, secretId: 'demo-2024', timestamp: now, clockSkewSeconds: 0 });
    expect(verify('1700000000', VECTORS['1700000000'].toUpperCase())).toMatchObject({ ok: true });
  });

  it('accepts bare hex entries during a rotation, mixed with v1= entries', () => {
    const other = 'ab'.repeat(32);
    expect(verify('1700000000', `${other} ${VECTORS['1700000000']}`)).toMatchObject({ ok: true });
    expect(verify('1700000000', `v1=${other} ${VECTORS['1700000000']}`)).toMatchObject({ ok: true });
    expect(verify('1700000000', `${VECTORS['1700000000']} v1=${other}`)).toMatchObject({ ok: true });
    expect(verify('1700000000', other)).toEqual({ ok: false, reason: 'no_matching_signature', clockSkewSeconds: 0 });
  });

  it.each(['a'.repeat(63), 'a'.repeat(65), 'g'.repeat(64), Buffer.alloc(32, 7).toString('base64')])(
    'reports a bare entry that is not 64 hex digits as malformed: %j',
    (bad) => {
      expect(verify('1700000000', bad)).toMatchObject({ ok: false, reason: 'malformed_signature' });
    },
  );

  it.each(['2023-11-14T22:13:20Z', '2023-11-15T05:43:20+07:30', '2023-11-14T22:13:20.123456Z'] as const)(
    'accepts an ISO-8601 timestamp %s, signed as sent, with v1= and bare',
    (timestamp) => {
      const expected = { ok: true, secretId: 'demo-2024', timestamp: timestamp.includes('.123456') ? now + 0.123456 : now };
      expect(verify(timestamp, VECTORS[timestamp])).toMatchObject(expected);
      expect(verify(timestamp, `v1=${VECTORS[timestamp]}`)).toMatchObject(expected);
    },
  );

  it('signs the ISO string as sent: the same instant written otherwise does not verify', () => {
    expect(verify('2023-11-14T22:13:20+00:00', VECTORS['2023-11-14T22:13:20Z'])).toMatchObject({
      ok: false,
      reason: 'no_matching_signature',
    });
  });

  it('applies the window to an ISO timestamp, both ways', () => {
    const iso = '2023-11-15T05:43:20+07:30';
    expect(verify(iso, VECTORS[iso], now + 300)).toMatchObject({ ok: true, clockSkewSeconds: 300 });
    expect(verify(iso, VECTORS[iso], now - 300)).toMatchObject({ ok: true, clockSkewSeconds: -300 });
    expect(verify(iso, VECTORS[iso], now + 301)).toEqual({ ok: false, reason: 'timestamp_out_of_window', clockSkewSeconds: 301 });
    expect(verify(iso, VECTORS[iso], now - 301)).toEqual({ ok: false, reason: 'timestamp_out_of_window', clockSkewSeconds: -301 });
  });

  it.each([
    '2023-11-14T22:13:20',
    '2023-11-14 22:13:20Z',
    '2023-11-14',
    '2023-02-30T22:13:20Z',
    '2023-11-14T24:13:20Z',
    '2023-11-14T22:13:20+0730',
    'Tue, 14 Nov 2023 22:13:20 GMT',
    '1700000000.5',
  ])('reports a timestamp in neither form as malformed: %j', (timestamp) => {
    expect(verify(timestamp, VECTORS['1700000000'])).toEqual({ ok: false, reason: 'malformed_timestamp' });
  });

  it('keeps standard-webhooks to unix seconds, as its spec says', () => {
    expect(verifyKat({}, { timestamp: '2021-02-25T15:02:10Z' })).toEqual({ ok: false, reason: 'malformed_timestamp' });
  });
});

describe('verifySignature, secret rotation', () => {
  const now = 1_750_000_000;
  const body = Buffer.from('{"event_id":"evt_rot"}');

  it.each(['hmac-sha256', 'standard-webhooks', 'hmac-sha256-body'] as const)(
    '%s: old and new secrets verify, a removed one fails',
    (scheme) => {
      const oldSecret = scheme === 'standard-webhooks' ? 'whsec_' + Buffer.alloc(32, 1).toString('base64') : 'old-secret';
      const newSecret = scheme === 'standard-webhooks' ? 'whsec_' + Buffer.alloc(32, 2).toString('base64') : 'new-secret';
      const secrets = [
        { id: 'old', value: oldSecret },
        { id: 'new', value: newSecret },
      ];
      const verifyWith = (secret: string, active: typeof secrets) => {
        const headers = signWebhook({ scheme, secret, id: 'evt_rot', body, timestamp: now });
        const names = SIGNATURE_HEADERS[scheme];
        return verifySignature({
          scheme,
          secrets: active,
          headers: {
            id: headers[names.id],
            timestamp: names.timestamp === undefined ? undefined : headers[names.timestamp],
            signature: headers[names.signature],
          },
          rawBody: body,
          now,
          toleranceSeconds: 300,
        });
      };

      expect(verifyWith(oldSecret, secrets)).toMatchObject({ ok: true, secretId: 'old' });
      expect(verifyWith(newSecret, secrets)).toMatchObject({ ok: true, secretId: 'new' });
      expect(verifyWith(oldSecret, [secrets[1]!])).toMatchObject({ ok: false, reason: 'no_matching_signature' });
    },
  );

  it('reports the secret that matched when the sender signs with both', () => {
    const a = signWebhook({ scheme: 'hmac-sha256', secret: 'a', id: 'e', body, timestamp: now });
    const b = signWebhook({ scheme: 'hmac-sha256', secret: 'b', id: 'e', body, timestamp: now });
    const result = verifySignature({
      scheme: 'hmac-sha256',
      secrets: [{ id: 'only-b', value: 'b' }],
      headers: {
        id: 'e',
        timestamp: String(now),
        signature: `${a['x-webhook-signature']} ${b['x-webhook-signature']}`,
      },
      rawBody: body,
      now,
      toleranceSeconds: 300,
    });
    expect(result).toMatchObject({ ok: true, secretId: 'only-b' });
  });

  it.each(['hmac-sha256', 'standard-webhooks', 'hmac-sha256-body'] as const)(
    '%s: a secret verifies until its retireAfter and never after (secret_retired)',
    (scheme) => {
      const value = (n: number) => (scheme === 'standard-webhooks' ? 'whsec_' + Buffer.alloc(32, n).toString('base64') : `secret-${n}`);
      const verifyAt = (at: number, secret: string, secrets: Array<{ id: string; value: string; retireAfter?: Date }>, atMs?: number) => {
        const headers = signWebhook({ scheme, secret, id: 'evt_rot', body, timestamp: at });
        const names = SIGNATURE_HEADERS[scheme];
        return verifySignature({
          scheme,
          secrets,
          headers: {
            id: headers[names.id],
            timestamp: names.timestamp === undefined ? undefined : headers[names.timestamp],
            signature: headers[names.signature],
          },
          rawBody: body,
          now: at,
          ...(atMs === undefined ? {} : { nowMs: atMs }),
          toleranceSeconds: 300,
        });
      };
      const retireAfter = new Date((now + 10) * 1000);
      const secrets = [
        { id: 'old', value: value(1), retireAfter },
        { id: 'new', value: value(2) },
      ];
      expect(verifyAt(now + 9, value(1), secrets)).toMatchObject({ ok: true, secretId: 'old' });
      expect(verifyAt(now + 10, value(1), secrets)).toMatchObject({ ok: false, reason: 'secret_retired' });
      expect(verifyAt(now + 10, value(2), secrets)).toMatchObject({ ok: true, secretId: 'new' });
      // Given the time in milliseconds, a retire time holds to the millisecond, not the second.
      const midSecond = [{ ...secrets[0]!, retireAfter: new Date((now + 9) * 1000 + 400) }, secrets[1]!];
      expect(verifyAt(now + 9, value(1), midSecond, (now + 9) * 1000 + 399)).toMatchObject({ ok: true, secretId: 'old' });
      expect(verifyAt(now + 9, value(1), midSecond, (now + 9) * 1000 + 400)).toMatchObject({ ok: false, reason: 'secret_retired' });
      // Signed with both: the active one verifies.
      const both = (at: number) => {
        const names = SIGNATURE_HEADERS[scheme];
        const a = signWebhook({ scheme, secret: value(1), id: 'evt_rot', body, timestamp: at });
        const b = signWebhook({ scheme, secret: value(2), id: 'evt_rot', body, timestamp: at });
        return verifySignature({
          scheme,
          secrets,
          headers: {
            id: 'evt_rot',
            timestamp: names.timestamp === undefined ? undefined : a[names.timestamp],
            signature: `${a[names.signature]} ${b[names.signature]}`,
          },
          rawBody: body,
          now: at,
          toleranceSeconds: 300,
        });
      };
      expect(both(now + 11)).toMatchObject({ ok: true, secretId: 'new' });
      // A signature no secret made is still no_matching_signature.
      expect(verifyAt(now + 11, value(3), secrets)).toMatchObject({ ok: false, reason: 'no_matching_signature' });
    },
  );
});

describe('verifySignature, hmac-sha256-body', () => {
  // GitHub's published example (docs "Validating webhook deliveries"); re-checked with
  // printf '%s' 'Hello, World!' | openssl dgst -sha256 -hmac "It's a Secret to Everybody"
  const secret = "It's a Secret to Everybody";
  const body = Buffer.from('Hello, World!');
  const signature = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';
  const now = 1_750_000_000;

  function verify(overrides: Partial<VerifySignatureInput> = {}, headerOverrides: VerifySignatureInput['headers'] = {}) {
    return verifySignature({
      scheme: 'hmac-sha256-body',
      secrets: [{ id: 'gh-1', value: secret }],
      headers: { id: 'evt_1', signature, ...headerOverrides },
      rawBody: body,
      now,
      toleranceSeconds: 300,
      ...overrides,
    });
  }

  /** Computed here with node:crypto, independently of schemes.ts: HMAC-SHA256(utf8 secret, raw body). */
  function independent(key: string, bytes: Uint8Array): string {
    return `sha256=${createHmac('sha256', Buffer.from(key, 'utf8')).update(bytes).digest('hex')}`;
  }

  it('has an id and a signature header and no timestamp header', () => {
    expect(SIGNATURE_HEADERS['hmac-sha256-body']).toStrictEqual({ id: 'x-webhook-id', signature: 'x-webhook-signature' });
  });

  it('accepts the known-answer vector, with no timestamp or skew in the result', () => {
    expect(independent(secret, body)).toBe(signature);
    expect(verify()).toStrictEqual({ ok: true, secretId: 'gh-1' });
  });

  it('accepts a signature computed with node:crypto directly, and what signWebhook produces', () => {
    const raw = Buffer.from('{"event_id":"evt_9","name":"Zürich ☀"}', 'utf8');
    expect(verify({ rawBody: raw }, { signature: independent(secret, raw) })).toStrictEqual({ ok: true, secretId: 'gh-1' });
    const signed = signWebhook({ scheme: 'hmac-sha256-body', secret, id: 'evt_9', body: raw });
    expect(signed['x-webhook-signature']).toBe(independent(secret, raw));
    expect(verify({ rawBody: raw }, { id: signed['x-webhook-id'], signature: signed['x-webhook-signature'] })).toMatchObject({ ok: true });
  });

  it('accepts upper-case hex', () => {
    expect(verify({}, { signature: 'sha256=' + signature.slice('sha256='.length).toUpperCase() })).toMatchObject({ ok: true });
  });

  it('does not sign the id: the body alone is covered', () => {
    expect(verify({}, { id: 'evt_other' })).toMatchObject({ ok: true });
  });

  it.each([
    ['a stale timestamp', { now, headers: { timestamp: '1' } }],
    ['a far-future timestamp', { now, headers: { timestamp: String(now + 10 ** 9) } }],
    ['a malformed timestamp', { now, headers: { timestamp: 'yesterday' } }],
    ['an empty timestamp', { now, headers: { timestamp: '' } }],
    ['no timestamp and a clock far off', { now: 0, headers: {} }],
    ['a zero tolerance', { now, headers: {}, toleranceSeconds: 0 }],
  ])('ignores %s: there is no replay window', (_name, c) => {
    const overrides: Partial<VerifySignatureInput> = { now: c.now };
    if ('toleranceSeconds' in c) overrides.toleranceSeconds = c.toleranceSeconds;
    expect(verify(overrides, c.headers)).toStrictEqual({ ok: true, secretId: 'gh-1' });
  });

  it('does not report a clock skew on failure', () => {
    expect(verify({ rawBody: Buffer.from('Hello, World?') }, { timestamp: '1' })).toStrictEqual({
      ok: false,
      reason: 'no_matching_signature',
    });
  });

  it('rejects a body changed by one byte (changed, appended, removed)', () => {
    const changed = Buffer.from(body);
    changed[changed.length - 1] = changed[changed.length - 1]! ^ 0x01;
    expect(verify({ rawBody: changed })).toStrictEqual({ ok: false, reason: 'no_matching_signature' });
    expect(verify({ rawBody: Buffer.concat([body, Buffer.from(' ')]) })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
    expect(verify({ rawBody: body.subarray(0, body.length - 1) })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
  });

  it('rejects a wrong secret', () => {
    expect(verify({ secrets: [{ id: 'other', value: "It's a Secret to Everybodz" }] })).toMatchObject({
      ok: false,
      reason: 'no_matching_signature',
    });
  });

  it.each([
    ['id', { id: undefined }],
    ['empty id', { id: '' }],
    ['signature', { signature: undefined }],
    ['empty signature', { signature: '' }],
  ])('reports a missing %s header', (_name, headers) => {
    expect(verify({}, headers)).toStrictEqual({ ok: false, reason: 'missing_header' });
  });

  it.each([
    'sha256=zz',
    'sha256=' + 'a'.repeat(63),
    'sha256=' + 'a'.repeat(65),
    'sha256=' + Buffer.alloc(32, 7).toString('base64'),
    'SHA256=' + signature.slice('sha256='.length),
    'sha256,' + signature.slice('sha256='.length),
    '=abc',
    'sha256',
    '   ',
    Array(17).fill(signature).join(' '),
  ])('reports a malformed signature %j', (bad) => {
    expect(verify({}, { signature: bad })).toStrictEqual({ ok: false, reason: 'malformed_signature' });
  });

  it('ignores unknown prefixes (sha1=, sha512=, the v1= of hmac-sha256)', () => {
    const hex = signature.slice('sha256='.length);
    expect(verify({}, { signature: `sha1=${'0'.repeat(40)}` })).toStrictEqual({ ok: false, reason: 'no_matching_signature' });
    expect(verify({}, { signature: `v1=${hex}` })).toStrictEqual({ ok: false, reason: 'no_matching_signature' });
    expect(verify({}, { signature: `sha1=${'0'.repeat(40)} sha512=${'0'.repeat(128)} ${signature}` })).toMatchObject({ ok: true });
  });

  it('still verifies when a malformed entry sits beside a valid one', () => {
    expect(verify({}, { signature: `garbage ${signature}` })).toMatchObject({ ok: true });
  });

  it('accepts up to 16 entries with the valid one last', () => {
    const others = Array.from({ length: 15 }, (_, i) => `sha256=${Buffer.alloc(32, i + 1).toString('hex')}`);
    expect(verify({}, { signature: [...others, signature].join(' ') })).toMatchObject({ ok: true });
    expect(verify({}, { signature: [...others, 'sha1=00', signature].join(' ') })).toMatchObject({
      ok: false,
      reason: 'malformed_signature',
    });
  });

  it('rotation: with two secrets configured either signature verifies and names its secret', () => {
    const secrets = [
      { id: 'old', value: 'old-secret-of-enough-length' },
      { id: 'new', value: 'new-secret-of-enough-length' },
    ];
    const oldSig = independent('old-secret-of-enough-length', body);
    const newSig = independent('new-secret-of-enough-length', body);
    expect(verify({ secrets }, { signature: oldSig })).toStrictEqual({ ok: true, secretId: 'old' });
    expect(verify({ secrets }, { signature: newSig })).toStrictEqual({ ok: true, secretId: 'new' });
    // A sender signing with both during the rotation: the first configured secret is reported.
    expect(verify({ secrets }, { signature: `${newSig} ${oldSig}` })).toStrictEqual({ ok: true, secretId: 'old' });
    expect(verify({ secrets: [secrets[1]!] }, { signature: `${oldSig} ${newSig}` })).toStrictEqual({ ok: true, secretId: 'new' });
    expect(verify({ secrets: [secrets[1]!] }, { signature: oldSig })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
  });

  it('never matches with an empty secret', () => {
    expect(verify({ secrets: [{ id: 'empty', value: '' }] }, { signature: independent('', body) })).toMatchObject({
      ok: false,
      reason: 'no_matching_signature',
    });
  });

  it('is not accepted by the timestamped schemes, nor they by it', () => {
    const hmacSigned = signWebhook({ scheme: 'hmac-sha256', secret, id: 'evt_1', body, timestamp: now });
    expect(verify({}, { signature: hmacSigned['x-webhook-signature'] })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
    expect(
      verifySignature({
        scheme: 'hmac-sha256',
        secrets: [{ id: 'gh-1', value: secret }],
        headers: { id: 'evt_1', timestamp: String(now), signature },
        rawBody: body,
        now,
        toleranceSeconds: 300,
      }),
    ).toMatchObject({ ok: false, reason: 'malformed_signature' });
  });
});
