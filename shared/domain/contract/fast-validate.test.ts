import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { eventAction, eventEnvelopeSchema } from './envelope.ts';
import { isCertainlyValidEvent } from './fast-validate.ts';
import { parseEvent } from './parse-event.ts';
import { sampleThemeEvent } from './sample.ts';
import { themeSnapshotSchema } from './theme-snapshot.ts';

/** What zod alone says about a parsed v1 body (the slow path of parseEvent). */
function zodAccepts(value: unknown): boolean {
  const envelope = eventEnvelopeSchema.safeParse(value);
  if (!envelope.success) return false;
  if (eventAction(envelope.data) === 'delete') return envelope.data.data === undefined || Object.keys(envelope.data.data).length === 0;
  if (envelope.data.resource.type !== 'theme') return true;
  return themeSnapshotSchema.safeParse(envelope.data.data).success;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const tricky: Json[] = [
  '',
  'theme',
  'theme.deleted',
  'theme.updated',
  'theme.created',
  'palette.updated',
  'x'.repeat(201),
  'x'.repeat(200),
  'x'.repeat(101),
  '#12345G',
  '#123456',
  '#abcdef',
  '123456',
  '#abc',
  '#abcd',
  '#11223344',
  '#1122334',
  'active',
  'split-flap',
  'sha256:' + 'a'.repeat(64),
  'sha256:' + 'a'.repeat(63),
  'sha1:' + 'a'.repeat(64),
  'palette',
  'exploded',
  'theme.exploded',
  'palette.deleted',
  'UTC',
  'Etc/UTC',
  'Mars/Olympus',
  'europe/berlin',
  'Europe/Berlin',
  '+01:00',
  'http://cdn.example.com/a.png',
  'https://cdn.example.com/a.png',
  'https://',
  'https:/x',
  'not a url',
  `https://x.com/${'a'.repeat(2050)}`,
  '2026-13-01T00:00:00Z',
  '2026-02-30T00:00:00Z',
  '2026-11-29T10:00:00+01:00',
  '2026-11-29T10:00:00',
  '2026-11-29T10:00:00.123456Z',
  'a/b',
  'ABC',
  'a'.repeat(64),
  'f'.repeat(64),
  'F'.repeat(64),
  'aurora--night',
  'aurora-night',
  '-x',
  'draft',
  'digital',
  'analog',
  'image',
  'font',
  'evt_1',
  'tenant_acme',
  'théme',
  -1,
  0,
  1,
  1.5,
  2 ** 53,
  1e300,
  null,
  true,
  false,
  {},
  [],
  { type: 'image' },
  ['x'],
  { a: 1 },
];

function paths(value: Json, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...prefix, i])));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...prefix, k]));
  return out;
}

function mutate(doc: Json, path: (string | number)[], op: 'set' | 'delete' | 'add', value: Json): void {
  if (path.length === 0) return;
  let parent: Json | undefined = doc;
  for (const step of path.slice(0, -1)) {
    if (parent === null || typeof parent !== 'object') return; // an earlier mutation removed the path
    parent = (parent as Record<string, Json>)[step as string];
  }
  const last = path.at(-1)!;
  if (parent === undefined || parent === null || typeof parent !== 'object') return;
  const container = parent as Record<string | number, Json>;
  if (op === 'set') container[last] = value;
  else if (op === 'delete') {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete container[last];
  } else {
    const target = container[last];
    if (target !== null && typeof target === 'object' && !Array.isArray(target)) (target as Record<string, Json>)['unexpected'] = value;
    else if (Array.isArray(target)) target.push(value);
  }
}

describe('isCertainlyValidEvent', () => {
  it('accepts the valid samples (so the fast path is really taken)', () => {
    for (const event of [
      sampleThemeEvent(),
      sampleThemeEvent({ idempotency_key: 'k' }),
      sampleThemeEvent({ event_type: 'theme.created' }),
    ]) {
      expect(isCertainlyValidEvent(JSON.parse(JSON.stringify(event)))).toBe(true);
    }
    const deleted = { ...sampleThemeEvent({ event_type: 'theme.deleted' }) } as Record<string, unknown>;
    delete deleted['data'];
    expect(isCertainlyValidEvent(deleted)).toBe(true);
  });

  it('never accepts what zod rejects (random mutations of a valid event)', () => {
    const base = JSON.parse(JSON.stringify(sampleThemeEvent({ event_id: 'evt_fixed', occurred_at: '2026-11-29T10:00:00.000Z' }))) as Json;
    const basePaths = paths(base).filter((p) => p.length > 0);
    const mutation = fc.tuple(
      fc.constantFrom(...basePaths),
      fc.constantFrom('set', 'delete', 'add') as fc.Arbitrary<'set' | 'delete' | 'add'>,
      fc.constantFrom(...tricky),
    );
    let fastAccepted = 0;
    let checked = 0;
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 3 }), (mutations) => {
        const doc = structuredClone(base);
        for (const [path, op, value] of mutations) mutate(doc, path, op, structuredClone(value));
        const value = doc as Record<string, unknown>;
        if (value === null || typeof value !== 'object' || value['event_version'] !== 1) return;
        checked += 1;
        const fast = isCertainlyValidEvent(value);
        if (fast) fastAccepted += 1;
        // The one-way property: fast => zod. (zod may accept more; those go the slow path.)
        if (fast) expect(zodAccepts(value), JSON.stringify(mutations)).toBe(true);
        // And parseEvent (fast path first) answers exactly what zod alone answers.
        expect(parseEvent(Buffer.from(JSON.stringify(value))).ok, JSON.stringify(mutations)).toBe(zodAccepts(value));
      }),
      { seed: 20261130, numRuns: 20_000 },
    );
    expect(checked).toBeGreaterThan(15_000);
    // Many mutations keep the event valid (e.g. a colour or a name replaced by another valid one).
    expect(fastAccepted).toBeGreaterThan(500);
    // 20,000 deterministic runs take seconds; the timeout leaves room for a loaded machine.
  }, 60_000);
});
