import { readFile, writeFile } from 'node:fs/promises';
import { formattedOpenApi, OPENAPI_FILE } from './openapi-file.ts';

// Usage: npm run openapi [-- --check]. --check exits 1 when docs/openapi.json is stale.
const content = await formattedOpenApi();
if (process.argv.includes('--check')) {
  const committed = await readFile(OPENAPI_FILE, 'utf8').catch(() => undefined);
  if (committed !== content) {
    console.error('docs/openapi.json is out of date: run npm run openapi');
    process.exit(1);
  }
} else {
  await writeFile(OPENAPI_FILE, content);
  console.log(`wrote ${OPENAPI_FILE.pathname}`);
}
