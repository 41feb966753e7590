// The release build (`npm run build`): a dist/ that runs wherever it is copied, with no repository,
// no npm and no build tooling beside it:
//   bin/<service>   launchers with the Node flags and environment defaults npm start uses
//   services/...    the bundles (infra/build/build.ts) of the services and the `bridge` CLI
//   shared/..., services/console/assets   the files modules read beside themselves at run time
//   node_modules/   the production dependencies, copied from this build's node_modules
// node_modules is copied rather than installed where dist/ lands because kafkajs runs patched
// (patches/): a fresh install would need patch-package and the patches at run time. The copy
// carries the patched kafkajs and the native CRC-32C built for this platform (kafkajs falls back
// to its JavaScript one where that does not load).
import { chmod, cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { buildBundles, bundlePath, type BundleLayout } from './build.ts';
import { repoRoot } from '../paths.ts';
import { serviceSpecs } from '../dev/services.ts';

export const distDir = path.join(repoRoot, 'dist');

/** The operator CLI: `bridge migrate` prepares the database, `bridge topics create` the topics. */
const CLI_MAIN = 'services/cli/main.ts';

/**
 * What modules read relative to their own `import.meta.url` at run time, copied to the same place
 * in dist/ (the layout infra/build/build.ts gives the bundles). A new such file belongs here; the
 * relocatable-build test (test/build/relocatable.test.ts) fails without it where it is read.
 */
export const RUNTIME_FILES = ['shared/domain/store/migrations', 'services/console/assets'] as const;

interface Launcher {
  name: string;
  main: string;
  nodeArgs: readonly string[];
  env: Readonly<Record<string, string>>;
  /** Where the flags and defaults come from, for the launcher's header. */
  from: string;
}

/** The CLI's Node flags are its shebang's (`#!/usr/bin/env -S node <flags>`). */
async function cliNodeArgs(): Promise<string[]> {
  const first = (await readFile(path.join(repoRoot, CLI_MAIN), 'utf8')).split('\n', 1)[0]!;
  const match = /^#!\S*env -S node(?<flags>.*)$/.exec(first);
  return match?.groups?.flags?.trim().split(/\s+/).filter(Boolean) ?? [];
}

const SHELL_SAFE = /^[\w.,:=/+-]+$/;
const shellWord = (value: string) => (SHELL_SAFE.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`);

/** A POSIX sh launcher: the Node version checked, defaults for unset variables, then `exec node <flags> <bundle>`. */
function launcherScript(launcher: Launcher, layout: BundleLayout, nodeMajor: number): string {
  const bundle = path.relative(path.join(layout.outDir, 'bin'), bundlePath(launcher.main, layout)).split(path.sep).join('/');
  const defaults = Object.entries(launcher.env).map(([name, value]) => {
    if (!SHELL_SAFE.test(value)) throw new Error(`${launcher.name}: ${name}=${value} needs quoting in a launcher`);
    return `: "\${${name}:=${value}}"\nexport ${name}`;
  });
  return [
    '#!/bin/sh',
    `# ${launcher.name}, with the Node flags and environment defaults of ${launcher.from} (written by npm run build).`,
    'set -e',
    // An older Node fails on a flag or a missing API instead: say which Node is needed.
    'version=$(node --version)',
    'major=${version#v}',
    `if [ "\${major%%.*}" -lt ${nodeMajor} ]; then`,
    `  echo "${launcher.name} needs Node ${nodeMajor} or later; the node on PATH is $version" >&2`,
    '  exit 1',
    'fi',
    ...defaults,
    ['exec node', ...launcher.nodeArgs.map(shellWord), `"$(dirname "$0")/${bundle}"`, '"$@"'].join(' '),
    '',
  ].join('\n');
}

/** Copies the packages the lockfile does not mark dev-only (those installed here) into dist/node_modules. */
async function copyRuntimePackages(outDir: string): Promise<void> {
  const lock = JSON.parse(await readFile(path.join(repoRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  const wanted = Object.entries(lock.packages)
    .filter(([key, entry]) => key.startsWith('node_modules/') && entry.dev !== true)
    // Optional packages for other platforms are in the lockfile but not installed.
    .filter(([key]) => existsSync(path.join(repoRoot, key)));
  for (const [key] of wanted) {
    const from = path.join(repoRoot, key);
    const to = path.join(outDir, key);
    await mkdir(path.dirname(to), { recursive: true });
    // A nested node_modules is copied under its own lockfile key, if it is not dev-only.
    await cp(from, to, {
      recursive: true,
      // A link keeps its own target: resolved, a relative one would name this machine's path.
      verbatimSymlinks: true,
      filter: (source) => source === from || path.basename(source) !== 'node_modules',
    });
  }
}

/** Builds dist/ afresh at `outDir` and returns the launchers' paths. */
export async function buildDist(outDir = distDir): Promise<string[]> {
  const layout: BundleLayout = { outDir, filesRoot: outDir };
  await rm(outDir, { recursive: true, force: true });
  const launchers: Launcher[] = [
    ...Object.values(serviceSpecs).map((spec) => ({
      name: spec.kind,
      main: spec.main,
      nodeArgs: spec.nodeArgs,
      env: spec.env,
      from: 'infra/dev/services.ts',
    })),
    { name: 'bridge', main: CLI_MAIN, nodeArgs: await cliNodeArgs(), env: {}, from: `the shebang of ${CLI_MAIN}` },
  ];
  await buildBundles(
    launchers.map((l) => l.main),
    layout,
  );
  for (const files of RUNTIME_FILES)
    await cp(path.join(repoRoot, files), path.join(outDir, files), { recursive: true, verbatimSymlinks: true });
  await copyRuntimePackages(outDir);
  const pkg = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as Record<string, unknown>;
  const { name, version, description, engines } = pkg;
  const nodeMajor = Number(/^>=(\d+)$/.exec((engines as { node?: string } | undefined)?.node ?? '')?.[1]);
  if (!Number.isInteger(nodeMajor)) throw new Error('package.json engines.node must read ">=<major>" (the launchers check it)');
  await writeFile(
    path.join(outDir, 'package.json'),
    `${JSON.stringify({ name, version, private: true, description, engines }, null, 2)}\n`,
  );
  await mkdir(path.join(outDir, 'bin'), { recursive: true });
  return Promise.all(
    launchers.map(async (launcher) => {
      const file = path.join(outDir, 'bin', launcher.name);
      await writeFile(file, launcherScript(launcher, layout, nodeMajor));
      await chmod(file, 0o755);
      return file;
    }),
  );
}
