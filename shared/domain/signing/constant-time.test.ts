import type * as Crypto from 'node:crypto';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// Counts the compares verifySignature makes; the real function still decides.
const compares = vi.hoisted(() => ({ count: 0 }));
vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof Crypto>();
  return {
    ...actual,
    timingSafeEqual: (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
      compares.count += 1;
      return actual.timingSafeEqual(a, b);
    },
  };
});

const { signWebhook } = await import('./sign-webhook.ts');
const { verifySignature } = await import('./verify-signature.ts');
const { SIGNATURE_HEADERS, SIGNATURE_SCHEMES } = await import('./schemes.ts');

describe('verifySignature compares every secret with every candidate, with no early exit', () => {
  beforeEach(() => {
    compares.count = 0;
  });

  const now = 1_750_000_000;
  const body = Buffer.from('{"event_id":"evt_ct"}');

  it.each(SIGNATURE_SCHEMES)('%s: 3 secrets x 2 candidates = 6 compares, the match first or last', (scheme) => {
    const secretValue = (n: number) =>
      scheme === 'standard-webhooks' ? 'whsec_' + Buffer.alloc(32, n).toString('base64') : `secret-number-${n}-of-enough-length`;
    const secrets = [1, 2, 3].map((n) => ({ id: `s${n}`, value: secretValue(n) }));
    const names = SIGNATURE_HEADERS[scheme];
    const signedBy = (n: number) => signWebhook({ scheme, secret: secretValue(n), id: 'evt_ct', body, timestamp: now });
    const verifyHeader = (signature: string) =>
      verifySignature({
        scheme,
        secrets,
        headers: {
          id: 'evt_ct',
          timestamp: names.timestamp === undefined ? undefined : String(now),
          signature,
        },
        rawBody: body,
        now,
        toleranceSeconds: 300,
      });
    const first = signedBy(1)[names.signature]!;
    const stranger = signedBy(9)[names.signature]!;

    expect(verifyHeader(`${first} ${stranger}`)).toMatchObject({ ok: true, secretId: 's1' });
    expect(compares.count).toBe(6);

    compares.count = 0;
    expect(verifyHeader(`${stranger} ${signedBy(3)[names.signature]!}`)).toMatchObject({ ok: true, secretId: 's3' });
    expect(compares.count).toBe(6);

    compares.count = 0;
    expect(verifyHeader(`${stranger} ${stranger}`)).toMatchObject({ ok: false, reason: 'no_matching_signature' });
    expect(compares.count).toBe(6);
  });
});
