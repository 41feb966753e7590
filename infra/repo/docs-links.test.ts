import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The README is the five-minute page; docs/ holds the rest. Every relative link in them must lead
// to a file that exists (and, into a markdown file, to a heading it has).
const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const README_MAX_LINES = 200;
// A table row wider than this does not read as a table in an editor or a diff: make it a list.
const TABLE_ROW_MAX_CHARS = 400;

const docs = [
  'README.md',
  ...readdirSync(path.join(repoRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

/** Lines outside fenced code blocks (a line inside one becomes empty, so line numbers hold). */
function outsideFences(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      return '';
    }
    if (marker !== undefined) {
      fence = marker;
      return '';
    }
    return line;
  });
}

/** The text outside fenced code blocks and inline code spans, line by line. */
function proseLines(markdown: string): string[] {
  return outsideFences(markdown).map((line) => line.replace(/(`+)[\s\S]*?\1/g, ''));
}

/** Inline links and images `[text](target)` and reference definitions `[label]: target`. */
function linkTargets(markdown: string): Array<{ line: number; target: string }> {
  const found: Array<{ line: number; target: string }> = [];
  proseLines(markdown).forEach((text, i) => {
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ line: i + 1, target: m[1]! });
    const ref = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(text);
    if (ref) found.push({ line: i + 1, target: ref[1]! });
  });
  return found;
}

function isRelative(target: string): boolean {
  return !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith('//');
}

/** The anchors GitHub gives a markdown file's headings. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of outsideFences(markdown)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

function brokenLinks(file: string): string[] {
  const markdown = readFileSync(path.join(repoRoot, file), 'utf8');
  const problems: string[] = [];
  for (const { line, target } of linkTargets(markdown)) {
    if (!isRelative(target)) continue;
    const [rawPath = '', fragment] = target.split('#', 2);
    const linkPath = decodeURIComponent(rawPath.split('?')[0]!);
    const resolved = linkPath === '' ? path.join(repoRoot, file) : path.resolve(path.dirname(path.join(repoRoot, file)), linkPath);
    if (!resolved.startsWith(repoRoot) || !existsSync(resolved)) {
      problems.push(`${file}:${line}: ${target} (no such file: ${path.relative(repoRoot, resolved)})`);
      continue;
    }
    if (fragment && resolved.endsWith('.md') && statSync(resolved).isFile()) {
      const anchors = headingAnchors(readFileSync(resolved, 'utf8'));
      if (!anchors.has(fragment.toLowerCase()))
        problems.push(`${file}:${line}: ${target} (no heading #${fragment} in ${path.relative(repoRoot, resolved)})`);
    }
  }
  return problems;
}

describe('README.md and docs/', () => {
  it('README.md stays a five-minute read (under 200 lines)', () => {
    const lines = readFileSync(path.join(repoRoot, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length;
    expect(lines, `README.md has ${lines} lines; move detail into docs/`).toBeLessThan(README_MAX_LINES);
  });

  it('README.md links to docs/', () => {
    expect(docs.length).toBeGreaterThan(1);
    const readme = linkTargets(readFileSync(path.join(repoRoot, 'README.md'), 'utf8')).map((l) => l.target);
    expect(readme.some((t) => t.startsWith('docs/'))).toBe(true);
  });

  const withResults = [
    ...docs,
    ...readdirSync(path.join(repoRoot, 'bench', 'results'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `bench/results/${f}`),
  ];
  it.each(withResults)(`%s has no table row over ${TABLE_ROW_MAX_CHARS} characters`, (file) => {
    const wide = outsideFences(readFileSync(path.join(repoRoot, file), 'utf8'))
      .map((line, i) => ({ line: i + 1, chars: line.length, table: line.trimStart().startsWith('|') }))
      .filter((l) => l.table && l.chars > TABLE_ROW_MAX_CHARS)
      .map((l) => `line ${l.line}: ${l.chars} characters`);
    expect(wide).toEqual([]);
  });

  it.each(docs)('every relative link in %s leads to an existing file (and heading)', (file) => {
    expect(brokenLinks(file)).toEqual([]);
  });
});

describe('link parsing', () => {
  it('finds inline, image and reference links outside code', () => {
    const md = ['See [a](docs/a.md#x) and ![i](img.png "t").', '`[not](code.md)`', '```', '[no](fence.md)', '```', '[ref]: ../b.md'].join(
      '\n',
    );
    expect(linkTargets(md).map((l) => l.target)).toEqual(['docs/a.md#x', 'img.png', '../b.md']);
  });

  it('gives headings the anchors GitHub gives them', () => {
    const anchors = headingAnchors(
      '# CLI reference: `bridge`\n## The operator CLI (`bridge`)\n## Every command\n## Every command\n```\n# not a heading\n```',
    );
    expect([...anchors]).toEqual(['cli-reference-bridge', 'the-operator-cli-bridge', 'every-command', 'every-command-1']);
  });
});
