import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { renderJsonSchemas, SCHEMAS_DIRECTORY } from './json-schema.ts';

// Usage: npx tsx shared/domain/contract/export-json-schema.ts [--check]
// --check exits 1 when the committed schema files differ from the contract.
const check = process.argv.includes('--check');
const stale: string[] = [];

for (const { fileName, content } of renderJsonSchemas()) {
  const url = new URL(fileName, SCHEMAS_DIRECTORY);
  const committed = await readFile(url, 'utf8').catch(() => undefined);
  if (committed === content) continue;
  if (check) {
    stale.push(fileName);
  } else {
    await mkdir(SCHEMAS_DIRECTORY, { recursive: true });
    await writeFile(url, content);
    console.log(`wrote ${url.pathname}`);
  }
}

if (stale.length > 0) {
  console.error(`JSON Schema out of date: ${stale.join(', ')}. Run: npx tsx shared/domain/contract/export-json-schema.ts`);
  process.exit(1);
}
