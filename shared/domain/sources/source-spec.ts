// A source as the database keeps it: the sources file's schema without the secret references (the
// secrets are sealed rows of their own) and with strict schemas inline. One definition for the file,
// the operator API, the console and the CLI: the same field rules and the same messages.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { SigningSecret } from '#domain/signing/index.ts';
import {
  identifier,
  orderingConflicts,
  parseSourcesFile,
  resolveSources,
  retireAfter,
  secretProblem,
  sharedSecretProblems,
  sourceConfigSchema,
  SourcesConfigError,
  type ReconcileSettings,
  type ReconcileSource,
  type WebhookSource,
  webhookSourceOf,
} from './sources-config.ts';
import { compileStrictSchema, type StrictSchema } from './strict-schemas.ts';

const jsonSchemaObject = z.record(z.string(), z.unknown());

export const storedSourceSchema = sourceConfigSchema.omit({ secrets: true, strictSchemas: true }).extend({
  // Resource type -> the JSON Schema itself (the file names a schema file; apply inlines it).
  strictSchemas: z.record(z.string(), jsonSchemaObject).default({}),
});
export type StoredSource = z.infer<typeof storedSourceSchema>;

/** A secret given to the API: its value, or `generate: true` for one the bridge makes (shown once). */
export const secretInputSchema = z
  .strictObject({
    id: identifier,
    value: z.string().min(1).optional(),
    generate: z.literal(true).optional(),
    retireAfter,
  })
  .refine((s) => (s.value === undefined) !== (s.generate === undefined), { message: 'give exactly one of value and generate' });
export type SecretInput = z.infer<typeof secretInputSchema>;

export const sourceCreateSchema = storedSourceSchema.extend({
  secrets: z.array(secretInputSchema).min(1, 'at least one secret is required'),
  enabled: z.boolean().default(true),
});
export type SourceCreate = z.infer<typeof sourceCreateSchema>;

/** An edit replaces the whole source but its secrets (rotate them on their own) and its enabled flag. */
export const sourceUpdateSchema = storedSourceSchema;

export const rotateSchema = z
  .strictObject({
    // The new secret's id; default: the source's id and the time, e.g. demo-20261206T190500Z.
    secretId: identifier.optional(),
    value: z.string().min(1).optional(),
    generate: z.literal(true).optional(),
    // Until when the secrets already there still verify: the overlap in which the provider switches.
    retireOthersAfter: z.iso.datetime({ offset: true, error: 'must be an ISO 8601 time with an offset, e.g. 2027-01-31T00:00:00Z' }),
  })
  .refine((s) => (s.value === undefined) !== (s.generate === undefined), { message: 'give exactly one of value and generate' });
export type RotateInput = z.infer<typeof rotateSchema>;

/** One problem with where it is: a path of fields, and 400 for a request's shape or 422 for its meaning. */
export interface FieldProblem {
  path: string;
  message: string;
}

export class SourceInputError extends Error {
  readonly status: 400 | 422;
  readonly problems: FieldProblem[];
  constructor(status: 400 | 422, problems: FieldProblem[]) {
    super(problems.map((p) => `${p.path || '(root)'}: ${p.message}`).join('; '));
    this.name = 'SourceInputError';
    this.status = status;
    this.problems = problems;
  }
}

/** Parses with `schema`; unknown or missing fields and wrong types are 400, values out of their rules 422. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, prefix: Array<string | number> = []): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const shape = result.error.issues.some((i) => i.code === 'unrecognized_keys' || i.code === 'invalid_type');
  throw new SourceInputError(
    shape ? 400 : 422,
    result.error.issues.map((i) => ({
      path: [...prefix, ...i.path].map(String).join('.'),
      message: i.code === 'unrecognized_keys' ? `unknown field(s): ${i.keys.join(', ')}` : i.message,
    })),
  );
}

/** The source's own rules beyond its fields' (the file schema's per-source checks), and its strict schemas compiled. */
export function storedSourceProblems(spec: StoredSource): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const types = new Set<string>();
  spec.resourceTypes.forEach((type, j) => {
    if (types.has(type)) problems.push({ path: `resourceTypes.${j}`, message: `duplicate resource type "${type}"` });
    types.add(type);
  });
  for (const [type, schema] of Object.entries(spec.strictSchemas)) {
    if (!types.has(type)) problems.push({ path: `strictSchemas.${type}`, message: `"${type}" is not one of the source's resourceTypes` });
    else
      try {
        compileStrictSchema(schema, `strictSchemas.${type}`);
      } catch (error) {
        problems.push({ path: `strictSchemas.${type}`, message: (error as Error).message });
      }
  }
  if (typeof spec.ordering === 'object')
    for (const type of Object.keys(spec.ordering))
      if (!types.has(type)) problems.push({ path: `ordering.${type}`, message: `"${type}" is not one of the source's resourceTypes` });
  return problems;
}

/** A secret's value against its source's scheme (length, encoding), as the file's secrets are checked. */
export function secretValueProblem(scheme: StoredSource['scheme'], value: string): string | undefined {
  return secretProblem(scheme, value);
}

/** What the whole set of sources must hold together: one ordering per tenant and type, a key per source. */
export function sourceSetProblems(sources: ReadonlyArray<{ spec: StoredSource; secrets: SigningSecret[] }>): FieldProblem[] {
  const problems: FieldProblem[] = orderingConflicts(
    sources.map(({ spec }) => ({ id: spec.id, tenants: spec.tenants, resourceTypes: spec.resourceTypes, ordering: spec.ordering })),
  ).map(({ index, message }) => ({ path: `sources.${sources[index]!.spec.id}.ordering`, message }));
  for (const message of sharedSecretProblems(sources.map(({ spec, secrets }) => toWebhookSource(spec, secrets))))
    problems.push({ path: 'secrets', message });
  return problems;
}

const compiledCache = new WeakMap<object, StrictSchema>();

/** What verification needs of a stored source at request time. */
export function toWebhookSource(spec: StoredSource, secrets: SigningSecret[]): WebhookSource {
  const strictSchemas: Record<string, StrictSchema> = {};
  for (const [type, schema] of Object.entries(spec.strictSchemas)) {
    let compiled = compiledCache.get(schema);
    if (compiled === undefined) {
      compiled = compileStrictSchema(schema, `source "${spec.id}" strictSchemas.${type}`);
      compiledCache.set(schema, compiled);
    }
    strictSchemas[type] = compiled;
  }
  return webhookSourceOf(spec, secrets, strictSchemas);
}

/**
 * A stored source's reconcile settings with the auth header's value read from the environment (the
 * credential for the provider's API stays in the workers' environment); undefined without `reconcile`.
 */
export function toReconcileSource(spec: StoredSource, env: Record<string, string | undefined>): ReconcileSource | undefined {
  if (spec.reconcile === undefined) return undefined;
  const { auth, ...rest } = spec.reconcile;
  let resolvedAuth: ReconcileSettings['auth'];
  if (auth !== undefined) {
    const value = env[auth.env];
    if (value === undefined || value.trim() === '')
      throw new SourcesConfigError([`source "${spec.id}" reconcile.auth: environment variable ${auth.env} is not set`]);
    resolvedAuth = { header: auth.header, value: `${auth.prefix}${value}` };
  }
  const webhook = toWebhookSource(spec, []);
  return {
    id: spec.id,
    tenants: [...spec.tenants],
    resourceTypes: [...spec.resourceTypes],
    reconcile: { ...rest, ...(resolvedAuth === undefined ? {} : { auth: resolvedAuth }) },
    ...(webhook.strictSchemas === undefined ? {} : { strictSchemas: webhook.strictSchemas }),
    ...(webhook.occurredAtTypes === undefined ? {} : { occurredAtTypes: webhook.occurredAtTypes }),
    ...(webhook.maxFutureSkewSeconds === undefined ? {} : { maxFutureSkewSeconds: webhook.maxFutureSkewSeconds }),
  };
}

/** A source as a sources file declares it, ready to compare with the database: spec and secret values. */
export interface DesiredSource {
  spec: StoredSource;
  secrets: Array<{ id: string; value: string; retireAfter?: string }>;
}

/**
 * Reads a sources file the way the ingress does (every secret resolved from the environment or its
 * file, every problem reported) and turns it into what the database holds (strict schemas inline).
 */
export function desiredFromFile(file: string, env: Record<string, string | undefined> = process.env): DesiredSource[] {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new SourcesConfigError([`cannot read ${file}: ${(error as Error).message}`]);
  }
  const parsed = parseSourcesFile(json);
  const baseDir = path.dirname(path.resolve(file));
  const resolved = resolveSources(parsed, { env, baseDir });
  return parsed.sources.map((source, i) => {
    const strictSchemas: Record<string, Record<string, unknown>> = {};
    for (const [type, schemaFile] of Object.entries(source.strictSchemas))
      strictSchemas[type] = JSON.parse(readFileSync(path.resolve(baseDir, schemaFile), 'utf8')) as Record<string, unknown>;
    const { secrets, strictSchemas: _files, ...rest } = source;
    return {
      spec: storedSourceSchema.parse({ ...rest, strictSchemas }),
      secrets: resolved[i]!.secrets.map((s, j) => ({
        id: s.id,
        value: s.value,
        ...(secrets[j]?.retireAfter === undefined ? {} : { retireAfter: secrets[j]!.retireAfter }),
      })),
    };
  });
}
