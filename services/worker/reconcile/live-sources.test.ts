import { describe, expect, it } from 'vitest';
import { storedSourceSchema } from '#domain/sources/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { reconcileSourcesOf } from './live-sources.ts';

const spec = (id: string, reconcile?: object) =>
  storedSourceSchema.parse({
    id,
    scheme: 'hmac-sha256',
    tenants: ['t1'],
    resourceTypes: ['theme'],
    ...(reconcile === undefined ? {} : { reconcile }),
  });

describe('reconcileSourcesOf', () => {
  it('resolves the API credential from the environment and leaves out (logging) a source whose variable is missing', () => {
    const lines: string[] = [];
    const logger = createLogger({ name: 'test', level: 'info' }, { write: (line: string) => void lines.push(line) });
    const snapshot = {
      version: 7,
      specs: [
        spec('plain'),
        spec('ok', { url: 'https://p.example/{id}', auth: { header: 'Authorization', env: 'OK_TOKEN', prefix: 'Bearer ' } }),
        spec('missing', { url: 'https://p.example/{id}', auth: { header: 'Authorization', env: 'MISSING_TOKEN' } }),
      ],
    };
    const sources = reconcileSourcesOf(snapshot, { OK_TOKEN: 'tok' }, logger);
    expect(sources.map((s) => s.id)).toEqual(['ok']);
    expect(sources[0]!.reconcile.auth).toEqual({ header: 'Authorization', value: 'Bearer tok' });
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toContain(
      'reconcile: source "missing" pulls nothing: source "missing" reconcile.auth: environment variable MISSING_TOKEN is not set',
    );
  });
});
