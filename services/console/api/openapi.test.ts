import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { formattedOpenApi, OPENAPI_FILE } from './openapi-file.ts';
import { openApiDocument } from './openapi.ts';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  components: { schemas: Record<string, object> };
};

describe('the operator API document (docs/openapi.json)', () => {
  it('is what the code generates (run npm run openapi after changing a schema or an endpoint)', async () => {
    expect(readFileSync(OPENAPI_FILE, 'utf8')).toBe(await formattedOpenApi());
  });

  it('lists every endpoint, and each schema compiles as JSON Schema 2020-12 with its references resolved', () => {
    const doc = openApiDocument() as Doc;
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/api/v1/audit',
      '/api/v1/config',
      '/api/v1/openapi.json',
      '/api/v1/sources',
      '/api/v1/sources/{id}',
      '/api/v1/sources/{id}/disable',
      '/api/v1/sources/{id}/enable',
      '/api/v1/sources/{id}/rotate',
    ]);
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    ajv.addSchema({ $id: 'doc', components: doc.components });
    for (const name of Object.keys(doc.components.schemas))
      expect(() => ajv.getSchema(`doc#/components/schemas/${name}`), name).not.toThrow();
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const r of refs) expect(Object.keys(doc.components.schemas)).toContain(r.split('/').at(-1)!.replace('"', ''));
  });

  it('takes what the API takes: a create body with a generated secret, and refuses an unknown field', () => {
    const doc = openApiDocument() as Doc;
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    const create = ajv.compile(doc.components.schemas.SourceCreate!);
    expect(create({ id: 'acme', tenants: ['t1'], secrets: [{ id: 's1', generate: true }] })).toBe(true);
    expect(create({ id: 'acme', tenants: ['t1'], colour: 'red', secrets: [{ id: 's1', generate: true }] })).toBe(false);
    const rotate = ajv.compile(doc.components.schemas.Rotate!);
    expect(rotate({ generate: true, retireOthersAfter: '2030-01-01T00:00:00Z' })).toBe(true);
  });
});
