import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The store owns the schema: no SQL statement in shared/ or services/ outside it. (Tests keep their
// own assertion SQL; plumbing/db/transaction.ts is the schema-free BEGIN/COMMIT helper.)
const root = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');
const EXEMPT = [/\.test\.ts$/, /^shared\/domain\/store\//, /^shared\/plumbing\/db\/transaction\.ts$/];

const SQL =
  /\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|WITH \w+ AS|LOCK TABLE|TRUNCATE|CREATE (?:TABLE|INDEX|DATABASE)|ALTER TABLE|DROP (?:TABLE|INDEX)|SET (?:LOCAL )?[a-z_]+ (?:=|TO)|BEGIN|COMMIT|ROLLBACK)\b|pg_advisory|pg_try_advisory/;

/** The string and template literals of a TypeScript file (comments skipped; a template's ${...} parts stay in). */
function stringLiterals(source: string): string[] {
  const literals: string[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      const end = source.indexOf('\n', i);
      i = end < 0 ? source.length : end;
    } else if (c === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      i = end < 0 ? source.length : end + 2;
    } else if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      while (j < source.length && source[j] !== c) {
        if (source[j] === '\\') j += 1;
        else if (c !== '`' && source[j] === '\n') break;
        j += 1;
      }
      literals.push(source.slice(i + 1, j));
      i = j + 1;
    } else {
      i += 1;
    }
  }
  return literals;
}

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : tsFiles(rel);
    return entry.name.endsWith('.ts') ? [rel] : [];
  });
}

describe('SQL lives in the store', () => {
  it('finds SQL in literals, not in comments or identifiers', () => {
    const found = (source: string) => stringLiterals(source).filter((l) => SQL.test(l));
    expect(found("const a = 'SELECT 1'; // SELECT 2")).toEqual(['SELECT 1']);
    expect(found('/* DELETE FROM x */ const b = `\n  UPDATE t SET a = 1`;')).toEqual(['\n  UPDATE t SET a = 1']);
    expect(found("const SELECT_ROWS = 'rows'; const c = \"it's not SQL\";")).toEqual([]);
    expect(found("await client.query('SELECT pg_advisory_unlock($1)', [k]);")).toHaveLength(1);
    expect(found("const u = 'postgres://host/db'; const q = 'COMMIT';")).toEqual(['COMMIT']);
  });

  it('no file in shared/ or services/ outside the store holds a SQL statement', () => {
    const offenders = [...tsFiles('shared'), ...tsFiles('services')]
      .filter((file) => !EXEMPT.some((re) => re.test(file)))
      .flatMap((file) =>
        stringLiterals(readFileSync(path.join(root, file), 'utf8'))
          .filter((literal) => SQL.test(literal))
          .map((literal) => `${file}: ${literal.trim().split('\n')[0]!.slice(0, 80)}`),
      );
    expect(offenders).toEqual([]);
  });
});
