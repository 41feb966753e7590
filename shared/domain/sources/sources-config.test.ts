import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadSources, parseSourcesFile, resolveSources, SourcesConfigError } from './index.ts';

const hmacSecret = 'a-long-enough-hmac-secret';
const stdSecret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof SourcesConfigError) return error.problems;
    throw error;
  }
  throw new Error('expected a SourcesConfigError');
}

describe('webhook sources configuration', () => {
  it('loads the committed dev configuration with the dev env values', () => {
    const sources = loadSources('infra/dev/dev-sources.json', {
      DEMO_SECRET: hmacSecret,
      DEMO_STD_SECRET: stdSecret,
      DEMO_BODY_SECRET: `${hmacSecret}-body`,
      DEMO_STRICT_SECRET: `${hmacSecret}-strict`,
      DEMO_TIME_SECRET: `${hmacSecret}-time`,
    });
    expect(sources.map((s) => [s.id, s.scheme, s.tenants])).toEqual([
      ['demo', 'hmac-sha256', ['tenant_acme']],
      ['demo-std', 'standard-webhooks', ['tenant_acme']],
      ['demo-body', 'hmac-sha256-body', ['tenant_acme']],
      ['demo-strict', 'hmac-sha256', ['tenant_acme']],
      ['demo-time', 'hmac-sha256', ['tenant_acme_time']],
    ]);
    expect(sources.map((s) => s.occurredAtTypes)).toEqual([undefined, undefined, undefined, undefined, ['theme']]);
    expect(sources[0]!.resourceTypes).toEqual(['theme', 'palette', 'design_catalogue', 'clock_widget_variant']);
    expect(Object.keys(sources[3]!.strictSchemas ?? {})).toEqual(['theme']);
    expect(sources[0]!.secrets).toEqual([{ id: 'demo-2026-01', value: hmacSecret }]);
  });

  it('reads ordering for all types or per type (default version), and refuses an unknown type or value', () => {
    const source = (ordering: unknown) => ({
      id: 'p',
      secrets: [{ id: 's', env: 'S' }],
      tenants: ['t'],
      resourceTypes: ['theme', 'palette'],
      ...(ordering === undefined ? {} : { ordering }),
    });
    const resolve = (ordering: unknown) =>
      resolveSources(parseSourcesFile({ sources: [source(ordering)] }), { env: { S: hmacSecret } })[0]!.occurredAtTypes;
    expect(resolve(undefined)).toBeUndefined();
    expect(resolve('version')).toBeUndefined();
    expect(resolve('occurred_at')).toEqual(['theme', 'palette']);
    expect(resolve({ palette: 'occurred_at', theme: 'version' })).toEqual(['palette']);
    expect(problems(() => parseSourcesFile({ sources: [source({ clock: 'occurred_at' })] }))).toEqual([
      'sources.0.ordering.clock: "clock" is not one of the source\'s resourceTypes',
    ]);
    expect(problems(() => parseSourcesFile({ sources: [source('time')] }))[0]).toMatch(/^sources\.0\.ordering: /);
  });

  it("reads a rotating secret's retireAfter (ISO time with an offset) and refuses anything else", () => {
    const file = parseSourcesFile({
      sources: [
        {
          id: 's',
          secrets: [
            { id: 'k_new', env: 'S_NEW' },
            { id: 'k_old', env: 'S_OLD', retireAfter: '2027-01-31T00:00:00+01:00' },
          ],
          tenants: ['t'],
        },
      ],
    });
    const [source] = resolveSources(file, { env: { S_NEW: hmacSecret, S_OLD: `${hmacSecret}-old` } });
    expect(source!.secrets.map((k) => [k.id, k.retireAfter?.toISOString()])).toEqual([
      ['k_new', undefined],
      ['k_old', '2027-01-30T23:00:00.000Z'],
    ]);
    for (const retireAfter of ['2027-01-31', '2027-01-31T00:00:00', 'soon']) {
      expect(() => parseSourcesFile({ sources: [{ id: 's', secrets: [{ id: 'k', env: 'S', retireAfter }], tenants: ['t'] }] })).toThrow(
        /retireAfter/,
      );
    }
  });

  it('refuses two sources that share a secret, naming both and never the value (a request would replay across them)', () => {
    const file = parseSourcesFile({
      sources: [
        { id: 'a', secrets: [{ id: 'a1', env: 'A_SECRET' }], tenants: ['t'] },
        // The same key in Standard Webhooks form (base64 of the same bytes) is the same key.
        { id: 'b', scheme: 'standard-webhooks', secrets: [{ id: 'b1', env: 'B_SECRET' }], tenants: ['t'] },
        {
          id: 'c',
          secrets: [
            { id: 'c1', env: 'C_SECRET' },
            { id: 'c2', env: 'A_SECRET' },
          ],
          tenants: ['t'],
        },
      ],
    });
    const env = { A_SECRET: hmacSecret, B_SECRET: `whsec_${Buffer.from(hmacSecret).toString('base64')}`, C_SECRET: `${hmacSecret}-c` };
    const found = problems(() => resolveSources(file, { env }));
    expect(found).toEqual([
      'source "b" secret "b1" has the same value as source "a" secret "a1": a request signed for one would verify for the other; give each source a secret of its own',
      'source "c" secret "c2" has the same value as source "a" secret "a1": a request signed for one would verify for the other; give each source a secret of its own',
    ]);
    expect(found.join('\n')).not.toContain(hmacSecret);
    // One source may list the same value under two ids (a rotation written in two steps): nothing to replay across.
    const rotating = parseSourcesFile({
      sources: [
        {
          id: 'r',
          secrets: [
            { id: 'r1', env: 'A_SECRET' },
            { id: 'r2', env: 'A_SECRET' },
          ],
          tenants: ['t'],
        },
      ],
    });
    expect(resolveSources(rotating, { env }).map((s) => s.secrets.length)).toEqual([2]);
  });

  it('refuses two sources that order one tenant and type differently, naming both sources, the tenant and the type', () => {
    const source = (id: string, tenants: string[], ordering: unknown, resourceTypes = ['theme', 'palette']) => ({
      id,
      secrets: [{ id: `${id}-1`, env: 'S' }],
      tenants,
      resourceTypes,
      ...(ordering === undefined ? {} : { ordering }),
    });
    expect(
      problems(() =>
        parseSourcesFile({
          sources: [
            source('shop', ['tenant_acme', 'tenant_beta'], undefined),
            source('shop-clock', ['tenant_acme'], { theme: 'occurred_at' }),
            source('shop-eu', ['tenant_beta'], 'occurred_at', ['palette']),
          ],
        }),
      ),
    ).toEqual([
      'sources.1.ordering: source "shop-clock" orders tenant "tenant_acme" type "theme" by occurred_at, source "shop" by version: ' +
        'a resource lives by one ordering; give both sources the same (bridge ordering switch moves stored resources)',
      'sources.2.ordering: source "shop-eu" orders tenant "tenant_beta" type "palette" by occurred_at, source "shop" by version: ' +
        'a resource lives by one ordering; give both sources the same (bridge ordering switch moves stored resources)',
    ]);
    // The same ordering, another tenant, or another type: no conflict.
    expect(() =>
      parseSourcesFile({
        sources: [
          source('a', ['tenant_acme'], { theme: 'occurred_at' }),
          source('b', ['tenant_acme'], { theme: 'occurred_at', palette: 'version' }),
          source('c', ['tenant_other'], 'version'),
          source('d', ['tenant_acme'], 'occurred_at', ['clock']),
        ],
      }),
    ).not.toThrow();
  });

  it('defaults the scheme to hmac-sha256 and the tolerance to 300 s', () => {
    const file = parseSourcesFile({ sources: [{ id: 's', secrets: [{ id: 'k', env: 'S_SECRET' }], tenants: ['t'] }] });
    const [source] = resolveSources(file, { env: { S_SECRET: hmacSecret } });
    expect(source).toMatchObject({ scheme: 'hmac-sha256', toleranceSeconds: 300 });
  });

  it('reports every missing secret at once: no secret defaults, no start without them', () => {
    const file = parseSourcesFile({
      sources: [
        {
          id: 'a',
          secrets: [
            { id: 'k1', env: 'A_SECRET' },
            { id: 'k2', env: 'A_NEXT' },
          ],
          tenants: ['t'],
        },
        { id: 'b', scheme: 'standard-webhooks', secrets: [{ id: 'k', env: 'B_SECRET' }], tenants: ['t'] },
      ],
    });
    expect(problems(() => resolveSources(file, { env: { A_NEXT: '' } }))).toEqual([
      'source "a" secret "k1": environment variable A_SECRET is not set',
      'source "a" secret "k2": environment variable A_NEXT is not set',
      'source "b" secret "k": environment variable B_SECRET is not set',
    ]);
  });

  it('reads secret files relative to the sources file, without the trailing newline', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sources-'));
    writeFileSync(path.join(dir, 'demo.secret'), `${hmacSecret}\n`);
    writeFileSync(
      path.join(dir, 'sources.json'),
      JSON.stringify({ sources: [{ id: 'd', secrets: [{ id: 'k', file: 'demo.secret' }], tenants: ['t'] }] }),
    );
    expect(loadSources(path.join(dir, 'sources.json'), {})[0]!.secrets[0]!.value).toBe(hmacSecret);
    writeFileSync(
      path.join(dir, 'missing.json'),
      JSON.stringify({ sources: [{ id: 'd', secrets: [{ id: 'k', file: 'nope.secret' }], tenants: ['t'] }] }),
    );
    expect(problems(() => loadSources(path.join(dir, 'missing.json'), {}))[0]).toMatch(/cannot read secret file .*nope\.secret \(ENOENT\)/);
  });

  it('refuses inline secret values, duplicates, unknown schemes and empty lists', () => {
    expect(
      problems(() => parseSourcesFile({ sources: [{ id: 'a', secrets: [{ id: 'k', value: 'inline' }], tenants: ['t'] }] })).length,
    ).toBeGreaterThan(0);
    const duplicated = {
      id: 'a',
      secrets: [
        { id: 'k', env: 'X' },
        { id: 'k', env: 'Y' },
      ],
      tenants: ['t'],
    };
    expect(problems(() => parseSourcesFile({ sources: [duplicated, { ...duplicated, secrets: [{ id: 'k', env: 'X' }] }] }))).toEqual([
      'sources.0.secrets.1.id: duplicate secret id "k"',
      'sources.1.id: duplicate source id "a"',
    ]);
    expect(
      problems(() => parseSourcesFile({ sources: [{ id: 'a', scheme: 'md5', secrets: [{ id: 'k', env: 'X' }], tenants: ['t'] }] })).length,
    ).toBe(1);
    expect(problems(() => parseSourcesFile({ sources: [{ id: 'a', secrets: [], tenants: [] }] }))).toHaveLength(2);
  });

  it('refuses secrets too weak or malformed to verify anything', () => {
    const file = parseSourcesFile({
      sources: [
        { id: 'a', secrets: [{ id: 'short', env: 'SHORT' }], tenants: ['t'] },
        {
          id: 'b',
          scheme: 'standard-webhooks',
          secrets: [
            { id: 'bad', env: 'BAD' },
            { id: 'tiny', env: 'TINY' },
          ],
          tenants: ['t'],
        },
      ],
    });
    expect(problems(() => resolveSources(file, { env: { SHORT: 'short', BAD: 'whsec_not base64!', TINY: 'whsec_AAAA' } }))).toEqual([
      'source "a" secret "short": is 5 bytes, at least 16 required',
      'source "b" secret "bad": must be base64, optionally prefixed with whsec_',
      'source "b" secret "tiny": decoded key is 3 bytes, at least 16 required',
    ]);
  });
});
