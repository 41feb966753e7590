import { describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook, type SignatureScheme } from '#domain/signing/index.ts';
import { send, testSources, useIngress } from '../kit/ingress.ts';

// An unknown source is answered exactly like a bad signature (docs/architecture.md, the ingress),
// so source ids cannot be enumerated. Whatever a request carries, every configured source that
// cannot verify it and an id nobody configured must give the same answer (status, body, whether
// the connection stays open).

const WRONG_HMAC = 'not-the-secret-of-any-source-0123456789';
const WRONG_STD = `whsec_${Buffer.from('not-the-secret-of-any-source-std').toString('base64')}`;

function signedAs(scheme: SignatureScheme): Array<[string, string]> {
  const event = sampleThemeEvent();
  const body = JSON.stringify(event);
  return Object.entries(signWebhook({ scheme, secret: scheme === 'standard-webhooks' ? WRONG_STD : WRONG_HMAC, body, id: event.event_id }));
}

/** Request shapes a prober might send; none is validly signed for any source. */
function shapes(): Record<string, { headers: Array<[string, string]>; body: string }> {
  const body = JSON.stringify(sampleThemeEvent());
  const hmac = signedAs('hmac-sha256');
  const std = signedAs('standard-webhooks');
  const bodyOnly = signedAs('hmac-sha256-body');
  const without = (headers: Array<[string, string]>, name: string) => headers.filter(([n]) => n !== name);
  return {
    'hmac-sha256 headers': { headers: hmac, body },
    'standard-webhooks headers': { headers: std, body },
    'body-only headers': { headers: bodyOnly, body },
    'no signature headers': { headers: [['content-type', 'application/json']], body },
    'hmac-sha256 headers without the timestamp': { headers: without(hmac, 'x-webhook-timestamp'), body },
    'standard-webhooks headers without the id': { headers: without(std, 'webhook-id'), body },
    'both header sets': { headers: [...hmac, ...without(std, 'content-type')], body },
    'a repeated standard-webhooks id': { headers: [...std, ['webhook-id', 'evt_other']], body },
    'x-webhook-id and x-webhook-event-id differing, beside standard-webhooks headers': {
      headers: [...std, ['x-webhook-id', 'evt_a'], ['x-webhook-event-id', 'evt_b']],
      body,
    },
  };
}

describe('source ids cannot be enumerated', () => {
  const { ingress } = useIngress({
    topics: { eventsPartitions: 1, retryLevels: 0 },
    config: {
      sources: [
        ...testSources(),
        {
          id: 'acme-body',
          scheme: 'hmac-sha256-body' as const,
          secrets: [{ id: 'body-1', value: 'test-body-secret-0123456789abcdef' }],
          tenants: ['tenant_acme'],
          toleranceSeconds: 300,
          resourceTypes: ['theme'],
        },
      ],
    },
  });

  it.each(Object.keys(shapes()))('%s: every source of every scheme answers like an unknown id', async (shape) => {
    const request = shapes()[shape]!;
    const answers: Record<string, unknown> = {};
    for (const id of ['acme', 'acme-std', 'acme-body', 'nobody-here']) {
      const answer = await send(ingress.url, { path: `/webhooks/${id}`, headers: request.headers, body: request.body });
      answers[id] = { status: answer.status, body: answer.body, connection: answer.headers.connection };
    }
    const unknown = answers['nobody-here'];
    expect(answers).toEqual({ acme: unknown, 'acme-std': unknown, 'acme-body': unknown, 'nobody-here': unknown });
  });

  it('still tells a provider that sent no signature headers at all what is missing (400, whatever the id)', async () => {
    const { headers, body } = shapes()['no signature headers']!;
    for (const id of ['acme', 'acme-std', 'nobody-here']) {
      const answer = await send(ingress.url, { path: `/webhooks/${id}`, headers, body });
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toEqual({ error: 'bad_request', message: 'missing header: x-webhook-id' });
    }
  });
});
