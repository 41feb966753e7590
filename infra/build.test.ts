import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildBundles, bundlePath } from './build.ts';
import { repoRoot } from './paths.ts';

describe('service bundles (infra/build.ts)', () => {
  it('run without a loader and find files relative to their sources, not to the bundle', async () => {
    const [bundle] = await buildBundles(['infra/fixtures/bundle-entry.ts']);
    expect(bundle).toBe(bundlePath('infra/fixtures/bundle-entry.ts'));
    const out = JSON.parse(execFileSync(process.execPath, [bundle!], { encoding: 'utf8' })) as { migrationsDir: string; here: string };
    expect(out.here).toBe(pathToFileURL(path.join(repoRoot, 'infra/fixtures/bundle-entry.ts')).href);
    expect(out.migrationsDir).toBe(path.join(repoRoot, 'shared/domain/store/migrations/'));
    expect(readdirSync(out.migrationsDir).some((f) => f.endsWith('.sql'))).toBe(true);
  });

  it('builds the relay thread its own bundle, which a worker bundle names as the thread entry', async () => {
    const [worker] = await buildBundles(['services/worker/main.ts']);
    const relay = bundlePath('services/worker/relay-thread.ts');
    expect(existsSync(relay)).toBe(true);
    expect(readFileSync(worker!, 'utf8')).toContain(JSON.stringify(pathToFileURL(relay).href));
  });
});
