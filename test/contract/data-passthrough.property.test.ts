import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { body, contractExample, describeAnswer, hmacSource, providerHeaders, resourceKeyOf, SECRET_A, useHarness } from '../kit/harness.ts';

const TENANT = 'tenant_acme';
const SOURCE = 'provider';
const RUNS = 20;
// FC_SEED=<n> replays a failing batch.
const SEED = process.env.FC_SEED === undefined ? Date.now() ^ (Math.random() * 0x7fffffff) : Number(process.env.FC_SEED);

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);
const KNOWN_DATA_FIELDS = new Set(['slug', 'name', 'status', 'palette', 'layout', 'assets']);

const wellFormed = (s: string) => s.isWellFormed() && !s.includes('\u0000');
const text = fc.string({ unit: 'grapheme', maxLength: 12 }).filter(wellFormed);
const key = fc.string({ unit: 'grapheme', maxLength: 10 }).filter((k) => wellFormed(k) && !FORBIDDEN_KEYS.has(k));
const leaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  // -0 serialises as 0: not a value a provider can send.
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Object.is(n, -0)),
  text,
);
// Containers nest at most 4 below the added object: the added value is at most 5 deep.
const { value } = fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown> }>((tie) => ({
  value: fc.oneof({ maxDepth: 4, depthIdentifier: 'extra' }, leaf, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4, depthIdentifier: 'extra' }),
  object: fc.dictionary(key, tie('value'), { maxKeys: 4, depthIdentifier: 'extra', noNullPrototype: true }),
}));
const extraData = fc.dictionary(
  key.filter((k) => !KNOWN_DATA_FIELDS.has(k)),
  value,
  { minKeys: 1, maxKeys: 5, noNullPrototype: true },
);

describe('contract: data passes through unchanged (property)', () => {
  const h = useHarness({ sources: [hmacSource(SOURCE, SECRET_A, [TENANT])] });

  it(`any JSON object added under data comes out on the applied topic deep-equal (${RUNS} runs, seed ${SEED})`, async () => {
    const extras = fc.sample(extraData, { numRuns: RUNS, seed: SEED });
    const events = extras.map((extra) => {
      const event = contractExample();
      event.data = { ...event.data, ...extra };
      return event;
    });
    const answers = await Promise.all(events.map((e) => h.post(SOURCE, body(e), { headers: providerHeaders(e) })));
    const refused = answers.flatMap((a, i) => (a.status === 202 ? [] : [{ run: i, answer: describeAnswer(a), extra: extras[i] }]));
    expect(refused, `seed ${SEED}`).toEqual([]);
    await h.settle();

    const applied = await h.applied();
    for (const [i, event] of events.entries()) {
      const records = applied.filter((r) => r.record.key === resourceKeyOf(event) && r.value.event_id === event.event_id);
      expect(records, `seed ${SEED} run ${i}: ${body(extras[i])}`).toHaveLength(1);
      expect(records[0]!.value.data, `seed ${SEED} run ${i}`).toEqual(event.data);
    }
  });
});
