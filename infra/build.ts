// The services run from JavaScript bundles built by esbuild, not from the TypeScript sources
// through tsx's loader. Measured side by side (bench/ingress/flags.ts, bench/results/footprint.md):
// the same ingress peaked at 130-137 MB RSS from a bundle against 167-235 MB through tsx, at about
// a tenth less CPU per request. tsx transforms with `keepNames` (every named function, closures
// made per call included, gets an `Object.defineProperty` call) and keeps a source map of every
// module; a bundle has neither and loads no loader.
//
// One bundle per entry point, node_modules left as imports. Each module's `import.meta.url` becomes
// its source file's URL, so files found relative to a module (migrations, JSON schemas, the
// console's pages) are read from the repository as they are when running the sources.
// Building takes a few tens of milliseconds, so it runs on every start and is never stale.
// `npm run build` (infra/build-services.ts) writes the services' bundles for running them by hand (docs/operations.md); a
// bundle names the repository's files by absolute path, so it runs where it was built.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { repoRoot } from './paths.ts';

export const buildDir = path.join(repoRoot, '.cache', 'build');

/** The relay thread's own bundle (services/worker/relay-thread.ts starts its thread from it). */
const RELAY_THREAD_SOURCE = 'services/worker/relay-thread.ts';

const sourceUrls: Plugin = {
  name: 'source-import-meta-url',
  setup(builder) {
    builder.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const url = JSON.stringify(pathToFileURL(args.path).href);
      return { contents: source.replaceAll('import.meta.url', url), loader: 'ts' };
    });
  },
};

/** The bundle's path for a source entry point (relative to the repository). */
export function bundlePath(entry: string): string {
  return path.join(buildDir, entry.replace(/\.ts$/, '.mjs'));
}

/**
 * Bundles the entry points (paths relative to the repository) and returns their bundles' paths in
 * the same order. The relay thread's bundle is always built with them: a worker bundle starts its
 * relay thread from it.
 */
export async function buildBundles(entries: string[]): Promise<string[]> {
  const all = [...new Set([...entries, RELAY_THREAD_SOURCE])];
  await Promise.all(
    all.map(async (entry) => {
      const result = await build({
        entryPoints: [path.join(repoRoot, entry)],
        outfile: bundlePath(entry),
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node24',
        packages: 'external',
        sourcemap: 'linked',
        logLevel: 'warning',
        plugins: [sourceUrls],
        define: { RELAY_THREAD_ENTRY: JSON.stringify(pathToFileURL(bundlePath(RELAY_THREAD_SOURCE)).href) },
        write: false,
      });
      // Written aside and renamed into place: a process starting from the bundle while another
      // build runs (tests start services while `npm start` builds) reads a whole file, old or new.
      for (const file of result.outputFiles) {
        await mkdir(path.dirname(file.path), { recursive: true });
        const aside = `${file.path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
        await writeFile(aside, file.contents);
        await rename(aside, file.path);
      }
    }),
  );
  return entries.map(bundlePath);
}
