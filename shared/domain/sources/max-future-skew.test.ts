import { describe, expect, it } from 'vitest';
import { parseSourcesFile, resolveSources, SourcesConfigError } from './index.ts';

const source = { id: 'p', secrets: [{ id: 'k', env: 'P_SECRET' }], tenants: ['t'] };
const env = { P_SECRET: 'a-long-enough-hmac-secret', Q_SECRET: 'another-long-enough-hmac-secret' };

function problems(json: unknown): string[] {
  try {
    parseSourcesFile(json);
  } catch (error) {
    if (error instanceof SourcesConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('sources: maxFutureSkewSeconds', () => {
  it('defaults to 300 s, and a source may set its own, up to a week', () => {
    const [plain, wide] = resolveSources(
      parseSourcesFile({
        sources: [source, { ...source, id: 'q', secrets: [{ id: 'k', env: 'Q_SECRET' }], maxFutureSkewSeconds: 604_800 }],
      }),
      {
        env,
      },
    );
    expect(plain!.maxFutureSkewSeconds).toBe(300);
    expect(wide!.maxFutureSkewSeconds).toBe(604_800);
  });

  it('refuses a bound that is not a whole number of seconds from 1 to a week', () => {
    for (const bad of [0, -1, 1.5, 604_801, '300']) {
      expect(problems({ sources: [{ ...source, maxFutureSkewSeconds: bad }] }), String(bad)).toEqual([
        expect.stringMatching(/^sources\.0\.maxFutureSkewSeconds: /),
      ]);
    }
  });
});
