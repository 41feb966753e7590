import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { RESOURCE_TYPE_PATTERN } from '#domain/contract/index.ts';
import { DEFAULT_MAX_FUTURE_SKEW_SECONDS, MAX_FUTURE_SKEW_LIMIT_SECONDS } from '#domain/contract/occurred-at-bound.ts';
import { decodeStandardSecret, SIGNATURE_SCHEMES, signingKey } from '#domain/signing/index.ts';
import type { SignatureScheme, SigningSecret } from '#domain/signing/index.ts';
import { loadStrictSchema, type StrictSchema } from './strict-schemas.ts';

export const DEFAULT_TOLERANCE_SECONDS = 300;
// Short HMAC keys are guessable offline from one captured request.
export const MIN_HMAC_SECRET_BYTES = 16;

export const identifier = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}');

// A secret's value is never written in the sources file: it names where the value lives, so the
// file can be committed and production has no secret defaults to fall back on.
// `retireAfter`: during a rotation, the time after which the provider no longer signs with this
// secret. It verifies until then (the overlap in which the provider switches) and is refused after;
// the ingress exports it (webhook_secret_retire_after_timestamp_seconds) for an alert before it ends.
export const retireAfter = z.iso
  .datetime({ offset: true, error: 'must be an ISO 8601 time with an offset, e.g. 2027-01-31T00:00:00Z' })
  .optional();
const secretRefSchema = z.union([
  z.strictObject({
    id: identifier,
    env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'),
    retireAfter,
  }),
  z.strictObject({ id: identifier, file: z.string().min(1), retireAfter }),
]);

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name');

export const DEFAULT_MAX_VERSION_LEAD = 2 ** 32;

function isLoopbackUrl(url: string): boolean {
  const host = /^https?:\/\/(?:[^@/?#]*@)?(\[[^\]]*\]|[^:/?#]*)/i.exec(url)?.[1]?.toLowerCase() ?? '';
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** The placeholders a reconcile URL template may use; each value is URL-encoded when expanded. */
export const RECONCILE_PLACEHOLDERS = ['tenant', 'type', 'id'] as const;

// How the bridge pulls a resource's current snapshot from the provider's API (push, then pull).
// The defaults keep an ailing API from being hammered: 5 requests a second with bursts of 10,
// and the breaker opens after 5 failures in a row for 30 s.
export const reconcileConfigSchema = z.strictObject({
  url: z
    .string()
    .regex(/^https?:\/\//, 'must be an http:// or https:// URL')
    .refine((url) => [...url.matchAll(/\{([^}]*)\}/g)].every((m) => (RECONCILE_PLACEHOLDERS as readonly string[]).includes(m[1]!)), {
      message: `placeholders must be among {${RECONCILE_PLACEHOLDERS.join('}, {')}}`,
    })
    .refine((url) => url.includes('{id}'), { message: 'must contain {id}' })
    // The auth header is a bearer credential: over plain http only to this machine (tests, a sidecar).
    .refine((url) => !/^http:\/\//i.test(url) || isLoopbackUrl(url), {
      message: 'http:// only for a loopback host (localhost, 127.0.0.0/8, [::1]): use https://',
    }),
  // The header's value is read from the environment at start-up, never written in this file.
  auth: z
    .strictObject({
      header: z
        .string()
        .regex(/^[A-Za-z0-9-]{1,64}$/)
        .default('Authorization'),
      env: envName,
      prefix: z.string().default(''),
    })
    .optional(),
  timeoutMs: z.int().min(1).max(60_000).default(3000),
  // Tries per reconciliation for a timeout, a 5xx or a network error (a 404 or another 4xx is an answer).
  attempts: z.int().min(1).max(10).default(3),
  retryDelayMs: z.int().min(0).max(60_000).default(500),
  rateLimit: z
    .strictObject({ perSecond: z.number().positive().max(10_000).default(5), burst: z.int().min(1).max(10_000).default(10) })
    .default({ perSecond: 5, burst: 10 }),
  breaker: z
    .strictObject({ failureThreshold: z.int().min(1).max(1000).default(5), cooldownMs: z.int().min(100).max(3_600_000).default(30_000) })
    .default({ failureThreshold: 5, cooldownMs: 30_000 }),
  // The largest jump (incoming version - stored version) applied without pulling: 1 means every
  // version must follow the one before; a provider that skips versions sets more.
  maxVersionGap: z.int().min(1).default(1),
  // The most a pulled version may lead the highest version the bridge knows for the resource. A
  // pulled version is the API's word, not a signed event, and one far ahead (a sentinel such as
  // 2^53-1, another counter) would make every later event stale for good; such an answer is
  // refused (`implausible`) and recorded for an operator. Providers whose versions are
  // timestamps may need more than the default (2^32).
  maxVersionLead: z.int().min(1).default(DEFAULT_MAX_VERSION_LEAD),
});

export const sourceLimitsSchema = z
  .strictObject({
    requestsPerSecond: z.number().positive().max(1_000_000).optional(),
    bytesPerSecond: z
      .int()
      .min(1024)
      .max(10 * 1024 ** 3)
      .optional(),
  })
  .refine((l) => l.requestsPerSecond !== undefined || l.bytesPerSecond !== undefined, {
    message: 'set requestsPerSecond, bytesPerSecond or both',
  });
export type SourceLimits = z.infer<typeof sourceLimitsSchema>;

/**
 * What orders a resource's events: the provider's `resource.version` (the default, and the strong
 * guard), or `occurred_at` for providers without an increasing version per resource (seed 002's
 * weaker fallback: clock skew, coarse precision and parallel updates can order two events wrongly).
 */
export const RESOURCE_ORDERINGS = ['version', 'occurred_at'] as const;
export type ResourceOrdering = (typeof RESOURCE_ORDERINGS)[number];
const orderingSchema = z.enum(RESOURCE_ORDERINGS);

export const sourceConfigSchema = z.strictObject({
  id: identifier,
  scheme: z.enum(SIGNATURE_SCHEMES).default('hmac-sha256'),
  secrets: z.array(secretRefSchema).min(1, 'at least one secret is required'),
  tenants: z.array(z.string().min(1)).min(1, 'at least one tenant is required'),
  toleranceSeconds: z.int().min(1).max(3600).default(DEFAULT_TOLERANCE_SECONDS),
  // The contract covers more than themes; each source names the types it may publish, and
  // event_type is <type>.created|updated|deleted for those only.
  resourceTypes: z
    .array(z.string().regex(RESOURCE_TYPE_PATTERN, `must match ${RESOURCE_TYPE_PATTERN.source}`))
    .min(1)
    .default(['theme']),
  // Opt-in: resource type -> JSON Schema file (relative to the sources file) that `data` must match.
  strictSchemas: z.record(z.string(), z.string().min(1)).default({}),
  // Opt-in: pull a resource's snapshot from the provider's API on a version gap, an update for an
  // unseen resource, a quarantine or an operator's request (shared/domain/reconcile).
  reconcile: reconcileConfigSchema.optional(),
  // One ordering for all the source's types, or per type (types left out order by version).
  ordering: z.union([orderingSchema, z.record(z.string(), orderingSchema)]).default('version'),
  // How far ahead of the ingress's clock an occurred_at may be (every type, whatever its ordering):
  // beyond it the event is refused (422), so one fast provider clock cannot freeze a resource.
  maxFutureSkewSeconds: z.int().min(1).max(MAX_FUTURE_SKEW_LIMIT_SECONDS).default(DEFAULT_MAX_FUTURE_SKEW_SECONDS),
  // Opt-in: what one ingress takes from the source per second (each ingress counts its own); past
  // it the answer is 429 with Retry-After. A provider's burst is one second's worth.
  limits: sourceLimitsSchema.optional(),
});

export const sourcesFileSchema = z.strictObject({ sources: z.array(sourceConfigSchema).min(1) }).superRefine((file, ctx) => {
  const seen = new Set<string>();
  file.sources.forEach((source, i) => {
    if (seen.has(source.id)) ctx.addIssue({ code: 'custom', path: ['sources', i, 'id'], message: `duplicate source id "${source.id}"` });
    seen.add(source.id);
    const types = new Set<string>();
    source.resourceTypes.forEach((type, j) => {
      if (types.has(type))
        ctx.addIssue({ code: 'custom', path: ['sources', i, 'resourceTypes', j], message: `duplicate resource type "${type}"` });
      types.add(type);
    });
    for (const type of Object.keys(source.strictSchemas)) {
      if (!types.has(type)) {
        ctx.addIssue({
          code: 'custom',
          path: ['sources', i, 'strictSchemas', type],
          message: `"${type}" is not one of the source's resourceTypes`,
        });
      }
    }
    if (typeof source.ordering === 'object') {
      for (const type of Object.keys(source.ordering)) {
        if (!types.has(type))
          ctx.addIssue({
            code: 'custom',
            path: ['sources', i, 'ordering', type],
            message: `"${type}" is not one of the source's resourceTypes`,
          });
      }
    }
    const secretIds = new Set<string>();
    source.secrets.forEach((secret, j) => {
      if (secretIds.has(secret.id)) {
        ctx.addIssue({ code: 'custom', path: ['sources', i, 'secrets', j, 'id'], message: `duplicate secret id "${secret.id}"` });
      }
      secretIds.add(secret.id);
    });
  });
  orderingConflicts(file.sources).forEach(({ index, message }) =>
    ctx.addIssue({ code: 'custom', path: ['sources', index, 'ordering'], message }),
  );
});

/**
 * A resource lives by one ordering: two sources that publish one tenant's type with different
 * orderings would each have their events dead-lettered on the other's resources. Each conflict is
 * reported once per tenant and type, on the later source, naming both.
 */
export function orderingConflicts(
  sources: ReadonlyArray<Pick<SourceConfig, 'id' | 'tenants' | 'resourceTypes' | 'ordering'>>,
): Array<{ index: number; message: string }> {
  const first = new Map<string, { source: string; ordering: ResourceOrdering }>();
  const conflicts: Array<{ index: number; message: string }> = [];
  sources.forEach((source, index) => {
    for (const type of new Set(source.resourceTypes)) {
      const ordering = typeof source.ordering === 'string' ? source.ordering : (source.ordering[type] ?? 'version');
      for (const tenant of new Set(source.tenants)) {
        const key = `${tenant}\u0000${type}`;
        const seen = first.get(key);
        if (seen === undefined) first.set(key, { source: source.id, ordering });
        else if (seen.ordering !== ordering)
          conflicts.push({
            index,
            message:
              `source "${source.id}" orders tenant "${tenant}" type "${type}" by ${ordering}, source "${seen.source}" by ${seen.ordering}: ` +
              'a resource lives by one ordering; give both sources the same (bridge ordering switch moves stored resources)',
          });
      }
    }
  });
  return conflicts;
}

export type SourceConfig = z.infer<typeof sourceConfigSchema>;
export type ReconcileConfig = z.infer<typeof reconcileConfigSchema>;
export type SourcesFile = z.infer<typeof sourcesFileSchema>;

/** A source with its secret values resolved: what verification needs at request time. */
export interface WebhookSource {
  id: string;
  scheme: SignatureScheme;
  secrets: SigningSecret[];
  tenants: string[];
  /** Seconds either way; unused by the body-only scheme, which has no timestamp (and so no replay window). */
  toleranceSeconds: number;
  /** The resource types this source may publish events for. */
  resourceTypes: string[];
  /** Compiled strict schemas by resource type (opt-in); absent types get only the bridge's own checks. */
  strictSchemas?: Readonly<Record<string, StrictSchema>>;
  /** The resource types ordered by `occurred_at` (opt-in); absent or not listed: ordered by version. */
  occurredAtTypes?: readonly string[];
  /** How far ahead of the receiving clock an occurred_at may be; absent: DEFAULT_MAX_FUTURE_SKEW_SECONDS. */
  maxFutureSkewSeconds?: number;
  /** Per-ingress rate limits (opt-in). */
  limits?: SourceLimits;
}

/** How a source's events of a resource type are ordered. */
export function orderingOf(source: Pick<WebhookSource, 'occurredAtTypes'>, resourceType: string): ResourceOrdering {
  return source.occurredAtTypes?.includes(resourceType) ? 'occurred_at' : 'version';
}

export class SourcesConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid webhook sources configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'SourcesConfigError';
    this.problems = problems;
  }
}

export interface ResolveOptions {
  env?: Record<string, string | undefined>;
  /** Relative secret file paths are resolved against this folder (the sources file's folder). */
  baseDir?: string;
}

export function parseSourcesFile(json: unknown): SourcesFile {
  const result = sourcesFileSchema.safeParse(json);
  if (result.success) return result.data;
  throw new SourcesConfigError(result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`));
}

/** Resolves every secret and reports every missing or unusable one, not just the first. */
export function resolveSources(file: SourcesFile, options: ResolveOptions = {}): WebhookSource[] {
  const env = options.env ?? process.env;
  const baseDir = options.baseDir ?? process.cwd();
  const problems: string[] = [];
  const sources = file.sources.map((source) => {
    const secrets: SigningSecret[] = [];
    for (const ref of source.secrets) {
      const where = `source "${source.id}" secret "${ref.id}"`;
      let value: string | undefined;
      if ('env' in ref) {
        value = env[ref.env];
        if (value === undefined || value.trim() === '') {
          problems.push(`${where}: environment variable ${ref.env} is not set`);
          continue;
        }
      } else {
        const file = path.resolve(baseDir, ref.file);
        try {
          // Secret files (Kubernetes / Docker secrets) usually end with a newline that is not part of the key.
          value = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
        } catch (error) {
          problems.push(`${where}: cannot read secret file ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
          continue;
        }
      }
      const problem = secretProblem(source.scheme, value);
      if (problem) {
        problems.push(`${where}: ${problem}`);
        continue;
      }
      secrets.push({ id: ref.id, value, ...(ref.retireAfter === undefined ? {} : { retireAfter: new Date(ref.retireAfter) }) });
    }
    const strictSchemas: Record<string, StrictSchema> = {};
    for (const [type, file] of Object.entries(source.strictSchemas)) {
      try {
        strictSchemas[type] = loadStrictSchema(file, baseDir);
      } catch (error) {
        problems.push(`source "${source.id}" strictSchemas.${type}: ${(error as Error).message}`);
      }
    }
    return webhookSourceOf(source, secrets, strictSchemas);
  });
  problems.push(...sharedSecretProblems(sources));
  if (problems.length > 0) throw new SourcesConfigError(problems);
  return sources;
}

/** A source as verification needs it, from its settings (file or database), opened secrets and compiled schemas. */
export function webhookSourceOf(
  source: Omit<SourceConfig, 'secrets' | 'strictSchemas'>,
  secrets: SigningSecret[],
  strictSchemas: Record<string, StrictSchema>,
): WebhookSource {
  const { occurredAtTypes } = reconcileOrdering(source);
  return {
    id: source.id,
    scheme: source.scheme,
    secrets,
    tenants: [...source.tenants],
    toleranceSeconds: source.toleranceSeconds,
    resourceTypes: [...source.resourceTypes],
    ...(Object.keys(strictSchemas).length > 0 ? { strictSchemas } : {}),
    ...(occurredAtTypes === undefined ? {} : { occurredAtTypes }),
    maxFutureSkewSeconds: source.maxFutureSkewSeconds,
    ...(source.limits === undefined ? {} : { limits: source.limits }),
  };
}

/**
 * The signed content of hmac-sha256 names no source, so a request signed for one source verifies
 * for every other source holding the same key: a capture could be replayed across them. Each
 * source must have keys of its own (compared as key bytes, so a standard-webhooks secret and the
 * same key written another way are caught too). The message names the secrets, never their values.
 */
export function sharedSecretProblems(sources: readonly WebhookSource[]): string[] {
  const owners = new Map<string, { source: string; secret: string }>();
  const problems: string[] = [];
  for (const source of sources) {
    const own = new Set<string>();
    for (const secret of source.secrets) {
      const key = signingKey(source.scheme, secret.value).toString('base64');
      if (own.has(key)) continue;
      own.add(key);
      const first = owners.get(key);
      if (first === undefined) owners.set(key, { source: source.id, secret: secret.id });
      else
        problems.push(
          `source "${source.id}" secret "${secret.id}" has the same value as source "${first.source}" secret "${first.secret}": ` +
            'a request signed for one would verify for the other; give each source a secret of its own',
        );
    }
  }
  return problems;
}

export function secretProblem(scheme: SignatureScheme, value: string): string | undefined {
  if (scheme === 'standard-webhooks') {
    try {
      const key = decodeStandardSecret(value);
      if (key.length < MIN_HMAC_SECRET_BYTES) return `decoded key is ${key.length} bytes, at least ${MIN_HMAC_SECRET_BYTES} required`;
    } catch {
      return 'must be base64, optionally prefixed with whsec_';
    }
    return undefined;
  }
  const bytes = Buffer.byteLength(value, 'utf8');
  return bytes < MIN_HMAC_SECRET_BYTES ? `is ${bytes} bytes, at least ${MIN_HMAC_SECRET_BYTES} required` : undefined;
}

/** Reads, validates and resolves the sources file: the one call a service or the CLI makes. */
export function loadSources(file: string, env: Record<string, string | undefined> = process.env): WebhookSource[] {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new SourcesConfigError([`cannot read ${file}: ${(error as Error).message}`]);
  }
  return resolveSources(parseSourcesFile(json), { env, baseDir: path.dirname(path.resolve(file)) });
}

/** A source's reconcile settings with the auth header's value resolved. */
export interface ReconcileSettings extends Omit<ReconcileConfig, 'auth' | 'maxVersionLead'> {
  auth?: { header: string; value: string };
  /** Default DEFAULT_MAX_VERSION_LEAD. */
  maxVersionLead?: number;
}

/** What the reconciler knows of a source: which tenants and types it owns, and how to pull them. */
export interface ReconcileSource {
  id: string;
  tenants: string[];
  resourceTypes: string[];
  reconcile: ReconcileSettings;
  /** The source's strict schemas (opt-in), applied to pulled snapshots as the ingress applies them to pushed ones. */
  strictSchemas?: Readonly<Record<string, StrictSchema>>;
  /** The types the source orders by occurred_at: a pull of one with no state row compares times. */
  occurredAtTypes?: readonly string[];
  /** The bound on a pulled time's lead over the clock; absent: DEFAULT_MAX_FUTURE_SKEW_SECONDS. */
  maxFutureSkewSeconds?: number;
}

/**
 * The sources that declare `reconcile`, with only their API credentials resolved: the worker and
 * the CLI pull snapshots but never verify a signature, so they need no webhook secret.
 */
export function resolveReconcileSources(
  file: SourcesFile,
  env: Record<string, string | undefined> = process.env,
  baseDir = process.cwd(),
): ReconcileSource[] {
  const problems: string[] = [];
  const out: ReconcileSource[] = [];
  for (const source of file.sources) {
    if (source.reconcile === undefined) continue;
    const { auth, ...rest } = source.reconcile;
    let resolvedAuth: ReconcileSettings['auth'];
    if (auth !== undefined) {
      const value = env[auth.env];
      if (value === undefined || value.trim() === '') {
        problems.push(`source "${source.id}" reconcile.auth: environment variable ${auth.env} is not set`);
        continue;
      }
      resolvedAuth = { header: auth.header, value: `${auth.prefix}${value}` };
    }
    const strictSchemas: Record<string, StrictSchema> = {};
    for (const [type, schemaFile] of Object.entries(source.strictSchemas)) {
      try {
        strictSchemas[type] = loadStrictSchema(schemaFile, baseDir);
      } catch (error) {
        problems.push(`source "${source.id}" strictSchemas.${type}: ${(error as Error).message}`);
      }
    }
    out.push({
      id: source.id,
      tenants: [...source.tenants],
      resourceTypes: [...source.resourceTypes],
      reconcile: { ...rest, ...(resolvedAuth === undefined ? {} : { auth: resolvedAuth }) },
      ...(Object.keys(strictSchemas).length > 0 ? { strictSchemas } : {}),
      ...reconcileOrdering(source),
    });
  }
  if (problems.length > 0) throw new SourcesConfigError(problems);
  return out;
}

/** What a pull needs of a source's ordering: its time-ordered types and its future-skew bound. */
export function reconcileOrdering(
  source: Pick<SourceConfig, 'ordering' | 'resourceTypes' | 'maxFutureSkewSeconds'>,
): Pick<ReconcileSource, 'occurredAtTypes' | 'maxFutureSkewSeconds'> {
  const ordering = source.ordering;
  const occurredAtTypes = source.resourceTypes.filter(
    (type) => (typeof ordering === 'string' ? ordering : (ordering[type] ?? 'version')) === 'occurred_at',
  );
  return { ...(occurredAtTypes.length > 0 ? { occurredAtTypes } : {}), maxFutureSkewSeconds: source.maxFutureSkewSeconds };
}

/** Reads the sources file and resolves the reconcile sources (see resolveReconcileSources). */
export function loadReconcileSources(file: string, env: Record<string, string | undefined> = process.env): ReconcileSource[] {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new SourcesConfigError([`cannot read ${file}: ${(error as Error).message}`]);
  }
  return resolveReconcileSources(parseSourcesFile(json), env, path.dirname(path.resolve(file)));
}
