import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { repoRoot } from '../kit/infra.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { loadStrictSchema, type WebhookSource } from '#domain/sources/index.ts';
import { send } from '../kit/ingress.ts';
import {
  body,
  contractExample,
  describeAnswer,
  errorCode,
  freshId,
  hmacSource,
  resourceKeyOf,
  SECRET_A,
  SECRET_B,
  useHarness,
} from '../kit/harness.ts';

const TENANT = 'tenant_acme';
const BODY_SECRET = 'contract-body-only-secret-0123456789';

/** What a source's configuration decides: its scheme, the resource types it may publish, its opt-in strict schema. */
describe('contract: per-source policy (real ingress, worker, Kafka and Postgres)', () => {
  const h = useHarness(() => {
    const strict = loadStrictSchema('strict-schemas/theme.strict.schema.json', path.join(repoRoot, 'infra', 'dev'));
    const sources: WebhookSource[] = [
      { ...hmacSource('themes-only', SECRET_A, [TENANT]) },
      { ...hmacSource('catalogue', SECRET_B, [TENANT]), resourceTypes: ['theme', 'palette', 'design_catalogue'] },
      { ...hmacSource('strict', SECRET_A, [TENANT]), strictSchemas: { theme: strict } },
      {
        id: 'body-only',
        scheme: 'hmac-sha256-body',
        secrets: [{ id: 'b-1', value: BODY_SECRET }],
        tenants: [TENANT],
        toleranceSeconds: 300,
        resourceTypes: ['theme'],
      },
    ];
    return { sources };
  });

  function postBodyOnly(bytes: Buffer, headers: Record<string, string> = {}) {
    const id = (JSON.parse(bytes.toString('utf8')) as { event_id: string }).event_id;
    const signed = signWebhook({ scheme: 'hmac-sha256-body', secret: BODY_SECRET, body: bytes, id });
    return send(h.ingress.url, { path: '/webhooks/body-only', headers: Object.entries({ ...signed, ...headers }), body: bytes });
  }

  it('a body-only signature (sha256=<hex>, no timestamp) is accepted and applied; a changed byte is refused', async () => {
    const event = contractExample();
    const bytes = Buffer.from(body(event));
    const signed = signWebhook({ scheme: 'hmac-sha256-body', secret: BODY_SECRET, body: bytes, id: event.event_id });
    expect(signed['x-webhook-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(Object.keys(signed)).not.toContain('x-webhook-timestamp');
    const answer = await postBodyOnly(bytes);
    expect(answer.status, describeAnswer(answer)).toBe(202);

    const tampered = Buffer.from(bytes.toString('utf8').replace('Minimal Dark', 'Minimal Dork'));
    const forged = await send(h.ingress.url, { path: '/webhooks/body-only', headers: Object.entries(signed), body: tampered });
    expect(forged.status).toBe(401);
    expect(forged.body).toBe('{"error":"unauthorized"}');

    await h.settle();
    expect(await h.inbox(TENANT, event.event_id)).toMatchObject({ status: 'applied' });
  });

  it('a resource type the source does not list is refused (422), and one it lists is applied', async () => {
    const palette = { ...contractExample(), event_type: 'palette.updated' };
    palette.resource = { ...palette.resource, type: 'palette', id: freshId('pal') };
    palette.data = { name: 'Dusk', swatches: ['#112233', '#445566'] };

    const refused = await h.post('themes-only', body(palette));
    expect(refused.status, describeAnswer(refused)).toBe(422);
    expect(errorCode(refused)).toBe('resource_type_not_allowed');

    const accepted = await h.post('catalogue', body(palette));
    expect(accepted.status, describeAnswer(accepted)).toBe(202);
    await h.settle();
    const records = await h.applied(resourceKeyOf(palette));
    expect(records.map((r) => r.value.data)).toEqual([palette.data]);
  });

  it('a source that opts in to a strict schema has its snapshots policed; the contract example passes it', async () => {
    const example = contractExample();
    const ok = await h.post('strict', body(example));
    expect(ok.status, describeAnswer(ok)).toBe(202);

    const extra = contractExample();
    extra.data.tags = ['dark'];
    const refused = await h.post('strict', body(extra));
    expect(refused.status, describeAnswer(refused)).toBe(422);
    expect(errorCode(refused)).toBe('invalid_data');
    expect(JSON.parse(refused.body).message).toMatch(/additional properties/);

    // The same snapshot from a source without the opt-in is carried through.
    const loose = await h.post('themes-only', body(extra));
    expect(loose.status, describeAnswer(loose)).toBe(202);
  });
});
