// The operator API's OpenAPI 3.1 document, generated from the zod schemas the API validates with
// (request bodies as the schemas take them, answers as the code builds them). Served at
// /api/v1/openapi.json and committed as docs/openapi.json (npm run openapi; a unit test compares).
import { z } from 'zod';
import { rotateSchema, sourceCreateSchema, sourceUpdateSchema } from '#domain/sources/index.ts';
import {
  auditListSchema,
  auditQuerySchema,
  configSchema,
  createdSchema,
  errorSchema,
  rotatedSchema,
  sourceIdSchema,
  sourceListSchema,
  sourceViewSchema,
} from './schemas.ts';

type JsonObject = Record<string, unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonObject {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io }) as JsonObject;
  return rest;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: JsonObject) => ({ 'application/json': { schema } });
const answer = (description: string, schema: JsonObject, headers?: JsonObject) => ({
  description,
  content: json(schema),
  ...(headers ? { headers } : {}),
});
const refusal = (description: string) => answer(description, ref('Error'));

const ETAG = { ETag: { description: 'The revision, quoted: send it back in If-Match to change the source.', schema: { type: 'string' } } };
const ID_PARAM = { name: 'id', in: 'path', required: true, schema: jsonSchema(sourceIdSchema, 'input') };
const IF_MATCH = {
  name: 'If-Match',
  in: 'header',
  required: true,
  description: 'The ETag of the source as read; missing: 428, stale: 412.',
  schema: { type: 'string', examples: ['"3"'] },
};

const COMMON = {
  '401': refusal('No token, or an unknown or revoked one (WWW-Authenticate: Bearer).'),
  '429': refusal('Too many failed tokens from this address or network (Retry-After).'),
};
const READ = { ...COMMON, '400': refusal('A malformed id or query.') };
const WRITE = {
  ...COMMON,
  '400': refusal("The request's shape: unparseable JSON, an unknown field, a wrong type (problems name each field)."),
  '403': refusal('A read token: changes need a write token.'),
  '404': refusal('No such source.'),
  '415': refusal('The body is not JSON.'),
  '422': refusal('A value breaks a rule: a short secret, an ordering conflict with another source, a plain-http reconcile URL ...'),
  '503': refusal('BRIDGE_SECRET_KEYS is not set (or lacks a key a secret is sealed with).'),
};
const PRECONDITION = {
  '412': refusal('The source changed since it was read (stale If-Match): read it again.'),
  '428': refusal('No If-Match.'),
};

function build(): JsonObject {
  const query = jsonSchema(auditQuerySchema, 'input') as { properties: Record<string, JsonObject> };
  const auditParameters = Object.entries(query.properties).map(([name, schema]) => {
    const { description, ...rest } = schema;
    return { name, in: 'query', required: false, ...(description === undefined ? {} : { description }), schema: rest };
  });
  const change = (summary: string, extra: JsonObject = {}) => ({
    summary,
    tags: ['sources'],
    parameters: [ID_PARAM, IF_MATCH],
    responses: { '200': answer('The source as it is now.', ref('SourceView'), ETAG), ...WRITE, ...PRECONDITION },
    ...extra,
  });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Webhook bridge operator API',
      version: '1',
      description:
        'Sources (providers, their tenants, secrets, ordering, reconcile and limits) read and changed while the bridge runs; ' +
        'every change is one transaction, names the revision it read (If-Match) and lands in the audit log under the token name. ' +
        'Authenticate with an operator token (bridge tokens create): read tokens read, write tokens change. Secret values ' +
        'are never returned, except a generated one in the answer that created it.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    security: [{ operatorToken: [] }],
    tags: [
      { name: 'sources', description: 'Sources and their secrets.' },
      { name: 'audit', description: 'Who changed what, when.' },
      { name: 'config', description: 'The configuration version and who serves it.' },
    ],
    paths: {
      '/api/v1/sources': {
        get: {
          summary: 'Every source',
          tags: ['sources'],
          responses: { '200': answer('The sources and the configuration version.', ref('SourceList')), ...COMMON },
        },
        post: {
          summary: 'Create a source (write)',
          tags: ['sources'],
          requestBody: { required: true, content: json(ref('SourceCreate')) },
          responses: {
            '201': answer('Created; generatedSecrets holds the values the bridge generated, shown this once.', ref('Created'), {
              ...ETAG,
              Location: { description: 'The new source.', schema: { type: 'string' } },
            }),
            ...WRITE,
            '409': refusal('A source with this id exists.'),
          },
        },
      },
      '/api/v1/sources/{id}': {
        get: {
          summary: 'One source',
          tags: ['sources'],
          parameters: [ID_PARAM],
          responses: { '200': answer('The source.', ref('SourceView'), ETAG), ...READ, '404': refusal('No such source.') },
        },
        put: change('Replace a source\u2019s settings (write); its secrets and enabled flag stay: rotate, enable, disable', {
          requestBody: { required: true, content: json(ref('SourceUpdate')) },
        }),
        delete: {
          summary: 'Delete a source and its secrets (write)',
          tags: ['sources'],
          parameters: [ID_PARAM, IF_MATCH],
          responses: { '204': { description: 'Deleted.' }, ...WRITE, ...PRECONDITION },
        },
      },
      '/api/v1/sources/{id}/disable': {
        post: change('Disable a source (write): its requests are answered like an unknown source\u2019s; events already taken still apply'),
      },
      '/api/v1/sources/{id}/enable': { post: change('Enable a source (write)') },
      '/api/v1/sources/{id}/rotate': {
        post: {
          ...change('Add a secret that verifies at once; the others verify until retireOthersAfter (write)'),
          requestBody: { required: true, content: json(ref('Rotate')) },
          responses: {
            '200': answer('Rotated; a generated value is in generatedSecrets, shown this once.', ref('Rotated'), ETAG),
            ...WRITE,
            ...PRECONDITION,
          },
        },
      },
      '/api/v1/audit': {
        get: {
          summary: 'The audit log, newest first',
          tags: ['audit'],
          parameters: auditParameters,
          responses: { '200': answer('Entries.', ref('AuditList')), ...READ },
        },
      },
      '/api/v1/config': {
        get: {
          summary: 'The configuration version, and the version each ingress and worker serves',
          tags: ['config'],
          responses: { '200': answer('behind: an instance serving an older version.', ref('Config')), ...COMMON },
        },
      },
      '/api/v1/openapi.json': {
        get: {
          summary: 'This document',
          security: [],
          responses: { '200': { description: 'The OpenAPI document.', content: { 'application/json': {} } } },
        },
      },
    },
    components: {
      securitySchemes: {
        operatorToken: { type: 'http', scheme: 'bearer', description: 'An operator token (bridge tokens create), read or write scope.' },
      },
      schemas: {
        SourceCreate: jsonSchema(sourceCreateSchema, 'input'),
        SourceUpdate: jsonSchema(sourceUpdateSchema, 'input'),
        Rotate: jsonSchema(rotateSchema, 'input'),
        SourceView: jsonSchema(sourceViewSchema, 'output'),
        SourceList: jsonSchema(sourceListSchema, 'output'),
        Created: jsonSchema(createdSchema, 'output'),
        Rotated: jsonSchema(rotatedSchema, 'output'),
        AuditList: jsonSchema(auditListSchema, 'output'),
        Config: jsonSchema(configSchema, 'output'),
        Error: jsonSchema(errorSchema, 'output'),
      },
    },
  };
}

let cached: JsonObject | undefined;

/** The document (built once). */
export function openApiDocument(): JsonObject {
  cached ??= build();
  return cached;
}

/** The committed file's text (before prettier): the document as JSON. */
export function renderOpenApi(): string {
  return `${JSON.stringify(openApiDocument(), null, 2)}\n`;
}
