import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeStandardSecret } from './schemes.ts';
import { signWebhook } from './sign-webhook.ts';

describe('signWebhook', () => {
  it('reproduces the Standard Webhooks known-answer vector', () => {
    const headers = signWebhook({
      scheme: 'standard-webhooks',
      secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      timestamp: 1614265330,
      body: '{"test": 2432232314}',
    });
    expect(headers).toEqual({
      'content-type': 'application/json',
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    });
  });

  it('reproduces a fixed hmac-sha256 vector', () => {
    // printf '%s' '1700000000.{"event_id":"evt_1","tenant_id":"tenant_acme"}' \
    //   | openssl dgst -sha256 -hmac 'demo-secret-change-me'
    const headers = signWebhook({
      scheme: 'hmac-sha256',
      secret: 'demo-secret-change-me',
      id: 'evt_1',
      timestamp: 1700000000,
      body: Buffer.from('{"event_id":"evt_1","tenant_id":"tenant_acme"}'),
    });
    expect(headers).toEqual({
      'content-type': 'application/json',
      'x-webhook-id': 'evt_1',
      'x-webhook-timestamp': '1700000000',
      'x-webhook-signature': 'v1=54e96e0c71008e71336c8e3b33b5471875e6e7135daf8c566e532ed7d1813b54',
    });
  });

  it("sends seed 004's forms on request: an ISO timestamp, a bare hex signature (openssl vectors)", () => {
    // printf '%s' '2023-11-14T22:13:20Z.{"event_id":"evt_1","tenant_id":"tenant_acme"}' \
    //   | openssl dgst -sha256 -hmac 'demo-secret-change-me'
    const sign = (timestampFormat: 'unix' | 'iso', signatureFormat: 'v1' | 'bare') =>
      signWebhook({
        scheme: 'hmac-sha256',
        secret: 'demo-secret-change-me',
        id: 'evt_1',
        timestamp: 1700000000,
        body: '{"event_id":"evt_1","tenant_id":"tenant_acme"}',
        timestampFormat,
        signatureFormat,
      });
    expect(sign('iso', 'bare')).toMatchObject({
      'x-webhook-timestamp': '2023-11-14T22:13:20Z',
      'x-webhook-signature': 'f1a3382e34858fe8b6e0a366dc6d4ce9c7f4a3fe225ca01d62ff9cdf5cd6b525',
    });
    expect(sign('iso', 'v1')['x-webhook-signature']).toBe('v1=f1a3382e34858fe8b6e0a366dc6d4ce9c7f4a3fe225ca01d62ff9cdf5cd6b525');
    expect(sign('unix', 'bare')).toMatchObject({
      'x-webhook-timestamp': '1700000000',
      'x-webhook-signature': '54e96e0c71008e71336c8e3b33b5471875e6e7135daf8c566e532ed7d1813b54',
    });
    expect(() =>
      signWebhook({
        scheme: 'standard-webhooks',
        secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
        id: 'm',
        body: '{}',
        timestampFormat: 'iso',
      }),
    ).toThrow(/hmac-sha256's/);
  });

  it("reproduces GitHub's published hmac-sha256-body vector", () => {
    // The example in GitHub's "Validating webhook deliveries" docs; re-checked with
    // printf '%s' 'Hello, World!' | openssl dgst -sha256 -hmac "It's a Secret to Everybody"
    const headers = signWebhook({
      scheme: 'hmac-sha256-body',
      secret: "It's a Secret to Everybody",
      id: 'evt_gh',
      body: 'Hello, World!',
    });
    expect(headers).toStrictEqual({
      'content-type': 'application/json',
      'x-webhook-id': 'evt_gh',
      'x-webhook-signature': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    });
  });

  it('hmac-sha256-body: signs the body alone, matching node:crypto, with no timestamp header', () => {
    const body = Buffer.from('{"event_id":"evt_1","tenant_id":"tenant_acme"}');
    const expected = createHmac('sha256', Buffer.from('demo-secret-change-me', 'utf8')).update(body).digest('hex');
    // printf '%s' '{"event_id":"evt_1","tenant_id":"tenant_acme"}' | openssl dgst -sha256 -hmac 'demo-secret-change-me'
    expect(expected).toBe('5010bdab8f0392ddf0ed5f05db827a2fd603e15a833059c73d9bbedfca01ed24');
    const signed = (timestamp?: number) =>
      signWebhook({ scheme: 'hmac-sha256-body', secret: 'demo-secret-change-me', id: 'evt_1', body, timestamp });
    expect(signed()).toStrictEqual({
      'content-type': 'application/json',
      'x-webhook-id': 'evt_1',
      'x-webhook-signature': `sha256=${expected}`,
    });
    // A timestamp is not part of this scheme: given or not, the same headers.
    expect(signed(1700000000)).toStrictEqual(signed());
    expect(Object.keys(signed(1))).not.toContain('x-webhook-timestamp');
  });

  it('defaults the timestamp to now', () => {
    const before = Math.floor(Date.now() / 1000);
    const headers = signWebhook({ scheme: 'hmac-sha256', secret: 's', id: 'evt_1', body: '{}' });
    const after = Math.floor(Date.now() / 1000);
    const timestamp = Number(headers['x-webhook-timestamp']);
    expect(timestamp).toBeGreaterThanOrEqual(before);
    expect(timestamp).toBeLessThanOrEqual(after);
  });

  it('signs the same bytes for a string and its UTF-8 buffer', () => {
    const body = '{"name":"Zürich ☀"}';
    const common = { scheme: 'hmac-sha256' as const, secret: 's', id: 'evt_1', timestamp: 1 };
    expect(signWebhook({ ...common, body })).toEqual(signWebhook({ ...common, body: Buffer.from(body, 'utf8') }));
  });

  it('refuses an empty hmac secret and an undecodable standard secret', () => {
    expect(() => signWebhook({ scheme: 'hmac-sha256', secret: '', id: 'a', body: '{}' })).toThrow(TypeError);
    expect(() => signWebhook({ scheme: 'hmac-sha256-body', secret: '', id: 'a', body: '{}' })).toThrow(TypeError);
    expect(() => signWebhook({ scheme: 'standard-webhooks', secret: 'whsec_not base64!', id: 'a', body: '{}' })).toThrow(TypeError);
  });
});

describe('decodeStandardSecret', () => {
  it('accepts the secret with or without the whsec_ prefix', () => {
    const withPrefix = decodeStandardSecret('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
    expect(decodeStandardSecret('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).toEqual(withPrefix);
    expect(withPrefix).toHaveLength(24);
  });

  it('rejects empty and non-base64 secrets', () => {
    expect(() => decodeStandardSecret('whsec_')).toThrow(TypeError);
    expect(() => decodeStandardSecret('')).toThrow(TypeError);
    expect(() => decodeStandardSecret('whsec_abc$')).toThrow(TypeError);
  });
});
