import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { buildBundles, bundlePath } from './build.ts';
import { repoRoot } from '../paths.ts';

const FIXTURE = 'infra/build/fixtures/bundle-entry.ts';
const runFixture = (bundle: string) =>
  JSON.parse(execFileSync(process.execPath, [bundle], { encoding: 'utf8' })) as { migrationsDir: string; here: string };

describe('service bundles (infra/build/build.ts)', () => {
  const temporary: string[] = [];
  afterAll(() => {
    for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
  });

  it('run without a loader and find files relative to their sources, not to the bundle', async () => {
    const [bundle] = await buildBundles([FIXTURE]);
    expect(bundle).toBe(bundlePath(FIXTURE));
    const out = runFixture(bundle!);
    expect(out.here).toBe(pathToFileURL(path.join(repoRoot, FIXTURE)).href);
    expect(out.migrationsDir).toBe(path.join(repoRoot, 'shared/domain/store/migrations/'));
    expect(readdirSync(out.migrationsDir).some((f) => f.endsWith('.sql'))).toBe(true);
  });

  it('name no absolute path: a build whose files sit beside its bundles still finds them when moved', async () => {
    const built = mkdtempSync(path.join(tmpdir(), 'bridge-bundles-'));
    const moved = mkdtempSync(path.join(tmpdir(), 'bridge-moved-'));
    temporary.push(built, moved);
    const [bundle] = await buildBundles([FIXTURE], { outDir: built, filesRoot: built });
    expect(readFileSync(bundle!, 'utf8')).not.toContain(repoRoot);
    expect(readFileSync(`${bundle!}.map`, 'utf8')).not.toContain(repoRoot);
    const target = path.join(moved, 'app');
    renameSync(built, target);
    const out = runFixture(path.join(target, path.relative(built, bundle!)));
    expect(out.here).toBe(pathToFileURL(path.join(target, FIXTURE)).href);
    expect(out.migrationsDir).toBe(path.join(target, 'shared/domain/store/migrations/'));
  });

  it('builds a worker bundle that names no absolute path', async () => {
    const [worker] = await buildBundles(['services/worker/main.ts']);
    expect(readFileSync(worker!, 'utf8')).not.toContain(repoRoot);
  });
});
