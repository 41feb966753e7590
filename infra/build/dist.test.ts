import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDist, RUNTIME_FILES } from './dist.ts';
import { repoRoot } from '../paths.ts';

/** Every file under `dir` whose bytes contain `text`, and every link whose target does. */
function filesContaining(dir: string, text: string): string[] {
  const needle = Buffer.from(text);
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() || entry.isSymbolicLink())
    .map((entry) => path.join(entry.parentPath, entry.name))
    .filter((file) => (lstatSync(file).isSymbolicLink() ? readlinkSync(file).includes(text) : readFileSync(file).includes(needle)));
}

// The live run (services against the broker and Postgres from a moved dist/) is
// test/build/relocatable.test.ts; this checks what needs neither.
// Each test starts whole programs from the build (three services in one): the unit project's 5 s
// default is a liveness bound a loaded machine can pass, so these get a minute.
describe('the release build (infra/build/dist.ts), moved away from the repository', { timeout: 60_000 }, () => {
  let dist: string;
  const temporary: string[] = [];
  const run = (launcher: string, args: string[], env: Record<string, string> = {}) =>
    spawnSync(path.join(dist, 'bin', launcher), args, {
      cwd: dist,
      encoding: 'utf8',
      env: { PATH: `${path.dirname(process.execPath)}${path.delimiter}/usr/bin:/bin`, ...env },
    });

  beforeAll(async () => {
    const built = mkdtempSync(path.join(tmpdir(), 'bridge-dist-'));
    const moved = mkdtempSync(path.join(tmpdir(), 'bridge-elsewhere-'));
    temporary.push(built, moved);
    await buildDist(built);
    dist = path.join(moved, 'app');
    renameSync(built, dist);
  }, 120_000);
  afterAll(() => {
    for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
  });

  it('names no path of the machine it was built on', () => {
    expect(filesContaining(dist, repoRoot)).toEqual([]);
  });

  it('holds a launcher per service and the CLI, and the files modules read at run time', () => {
    for (const name of ['ingress', 'worker', 'console', 'bridge']) expect(existsSync(path.join(dist, 'bin', name))).toBe(true);
    expect(readFileSync(path.join(dist, 'bin', 'ingress'), 'utf8')).toContain('MALLOC_ARENA_MAX:=2');
    for (const files of RUNTIME_FILES) expect(readdirSync(path.join(dist, files)).length).toBeGreaterThan(0);
  });

  it('carries the patched kafkajs and no build tooling', () => {
    const eos = readFileSync(path.join(dist, 'node_modules/kafkajs/src/producer/eosManager/index.js'), 'utf8');
    expect(eos).toContain('withTransactionCoordinator');
    for (const tool of ['esbuild', 'tsx', 'patch-package', 'typescript', 'vitest'])
      expect(existsSync(path.join(dist, 'node_modules', tool))).toBe(false);
  });

  it('runs the CLI with no repository, npm or tsx beside it', () => {
    const help = run('bridge', ['--help']);
    expect(help.stderr).toBe('');
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('migrate');
  });

  it('refuses, saying why, a Node older than package.json allows', () => {
    const fake = mkdtempSync(path.join(tmpdir(), 'bridge-old-node-'));
    temporary.push(fake);
    writeFileSync(path.join(fake, 'node'), '#!/bin/sh\necho v20.20.2\n', { mode: 0o755 });
    const result = spawnSync(path.join(dist, 'bin', 'worker'), [], {
      encoding: 'utf8',
      env: { PATH: `${fake}${path.delimiter}/usr/bin:/bin` },
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toBe('worker needs Node 24 or later; the node on PATH is v20.20.2\n');
  });

  it('loads every service: each stops on its missing configuration, not on a missing module', () => {
    for (const name of ['ingress', 'worker', 'console']) {
      const result = run(name, []);
      expect(result.status, `${name}: ${result.stderr}`).toBe(1);
      expect(result.stderr).toContain('KAFKA_BROKERS');
      expect(result.stderr).not.toMatch(/ERR_MODULE_NOT_FOUND|Cannot find/);
    }
  });
});
