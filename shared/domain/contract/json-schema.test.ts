import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { renderJsonSchemas, SCHEMAS_DIRECTORY } from './json-schema.ts';

describe('committed JSON Schema', () => {
  it.each(renderJsonSchemas())(
    '$fileName matches the zod contract (npx tsx shared/domain/contract/export-json-schema.ts)',
    async ({ fileName, content }) => {
      const committed = await readFile(new URL(fileName, SCHEMAS_DIRECTORY), 'utf8');
      expect(committed).toBe(content);
      expect(content.endsWith('}\n')).toBe(true);
    },
  );
});
