// The services run from JavaScript bundles built by esbuild, not from the TypeScript sources
// through tsx's loader: side by side, a bundle needs less memory and less CPU per request
// (bench/ingress/flags.ts). tsx transforms with `keepNames` (every
// named function, closures made per call included, gets an `Object.defineProperty` call) and keeps
// a source map of every module; a bundle has neither and loads no loader.
//
// One bundle per entry point, node_modules left as imports. A module's `import.meta.url` becomes
// the URL of its source file as the build lays files out, written relative to the bundle, so files
// found relative to a module (migrations, the console's assets) are read from the repository in a
// development build and from dist/ in the release build (infra/build/dist.ts), which copies them
// there.
// No bundle names a machine's path, so a dist/ runs wherever it is copied.
// Building is quick, so it runs on every start and a bundle is never stale.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { build, type Plugin } from 'esbuild';
import { repoRoot } from '../paths.ts';

export const buildDir = path.join(repoRoot, '.cache', 'build');

/** Where a build writes its bundles and where their modules find their files at run time. */
export interface BundleLayout {
  /** Entry `services/x/main.ts` is bundled to `<outDir>/services/x/main.mjs`. */
  outDir: string;
  /** The module `shared/a/b.ts` finds its files in `<filesRoot>/shared/a/`: the repository, or dist/. */
  filesRoot: string;
}

/** npm start's, the tests' and the benchmarks' bundles: in .cache/build, reading the repository's files. */
export const devLayout: BundleLayout = { outDir: buildDir, filesRoot: repoRoot };

/** Where the layout places a repository file (absolute path). */
function placed(file: string, layout: BundleLayout): string {
  return path.join(layout.filesRoot, path.relative(repoRoot, file));
}

/** A relative URL from a directory to a file, for `new URL(relative, base)`. */
function relativeUrl(fromDir: string, file: string): string {
  const relative = path.relative(fromDir, file).split(path.sep).map(encodeURIComponent).join('/');
  return relative.startsWith('.') ? relative : `./${relative}`;
}

/** Rewrites each module's `import.meta.url` to where the layout places its source, relative to the bundle. */
function moduleUrls(outfile: string, layout: BundleLayout): Plugin {
  return {
    name: 'module-import-meta-url',
    setup(builder) {
      builder.onLoad({ filter: /\.ts$/ }, async (args) => {
        const source = await readFile(args.path, 'utf8');
        const url = `new URL(${JSON.stringify(relativeUrl(path.dirname(outfile), placed(args.path, layout)))}, import.meta.url).href`;
        return { contents: source.replaceAll('import.meta.url', url), loader: 'ts' };
      });
    },
  };
}

/** A source map naming its sources where the layout places them (their text is inside the map). */
function placedSourceMap(text: string, mapFile: string, layout: BundleLayout): string {
  const map = JSON.parse(text) as { sources: string[] };
  const dir = path.dirname(mapFile);
  map.sources = map.sources.map((source) => relativeUrl(dir, placed(path.resolve(dir, source), layout)));
  return JSON.stringify(map);
}

/** The bundle's path for a source entry point (relative to the repository). */
export function bundlePath(entry: string, layout: BundleLayout = devLayout): string {
  return path.join(layout.outDir, entry.replace(/\.ts$/, '.mjs'));
}

/**
 * Bundles the entry points (paths relative to the repository) and returns their bundles' paths in
 * the same order.
 */
export async function buildBundles(entries: string[], layout: BundleLayout = devLayout): Promise<string[]> {
  await Promise.all(
    [...new Set(entries)].map(async (entry) => {
      const outfile = bundlePath(entry, layout);
      const result = await build({
        entryPoints: [path.join(repoRoot, entry)],
        outfile,
        // Paths in the bundle's comments are relative to the repository, never a machine's.
        absWorkingDir: repoRoot,
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node24',
        packages: 'external',
        sourcemap: 'linked',
        logLevel: 'warning',
        plugins: [moduleUrls(outfile, layout)],
        write: false,
      });
      // Written aside and renamed into place: a process starting from the bundle while another
      // build runs (tests start services while `npm start` builds) reads a whole file, old or new.
      for (const file of result.outputFiles) {
        await mkdir(path.dirname(file.path), { recursive: true });
        const aside = `${file.path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
        await writeFile(aside, file.path.endsWith('.map') ? placedSourceMap(file.text, file.path, layout) : file.contents);
        await rename(aside, file.path);
      }
    }),
  );
  return entries.map((entry) => bundlePath(entry, layout));
}
