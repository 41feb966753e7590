import { readFile, writeFile } from 'node:fs/promises';
import { ASYNCAPI_FILE } from './file.ts';
import { renderAsyncApiFile } from './asyncapi.ts';

// Usage: npm run asyncapi [-- --check]. --check exits 1 when docs/asyncapi.json is stale.
const content = renderAsyncApiFile();
if (process.argv.includes('--check')) {
  const committed = await readFile(ASYNCAPI_FILE, 'utf8').catch(() => undefined);
  if (committed !== content) {
    console.error('docs/asyncapi.json is out of date: run npm run asyncapi');
    process.exit(1);
  }
} else {
  await writeFile(ASYNCAPI_FILE, content);
  console.log(`wrote ${ASYNCAPI_FILE.pathname}`);
}
