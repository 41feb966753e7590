// What the operator API answers and the query it takes, as zod schemas: the OpenAPI document is
// generated from these and from the domain's request schemas (sourceCreateSchema and the rest), so
// the document cannot drift from what the code accepts and returns.
import { z } from 'zod';
import { storedSourceSchema, type AuditEntry, type SourceView } from '#domain/sources/index.ts';
import { identifier } from '#domain/sources/sources-config.ts';

const time = z.iso.datetime({ offset: true });

export const sourceIdSchema = identifier;

export const secretViewSchema = z
  .object({
    id: z.string(),
    keyId: z.string().describe('The key (of BRIDGE_SECRET_KEYS) the value is sealed with.'),
    createdAt: time,
    retireAfter: time.nullable().describe('After this time the secret no longer verifies; null: no end.'),
    lastVerifiedAt: time.nullable().describe('When an ingress last verified a request with it (flushed every few seconds); null: never.'),
    state: z.enum(['active', 'retiring', 'retired']),
  })
  .describe('A signing secret, by id: its value never leaves the bridge after it is created.');

export const sourceViewSchema = z
  .object({
    id: z.string(),
    enabled: z.boolean().describe('A disabled source is answered like an unknown one.'),
    revision: z.int().describe('Send it back in If-Match (as the ETag, quoted) to change the source.'),
    createdAt: time,
    updatedAt: time,
    spec: storedSourceSchema,
    secrets: z.array(secretViewSchema),
  })
  .describe('A source as stored, with its secrets by id.');

export const generatedSecretSchema = z
  .object({ id: z.string(), value: z.string() })
  .describe('A secret the bridge generated: shown in this answer only, never again.');

export const createdSchema = z.object({ source: sourceViewSchema, generatedSecrets: z.array(generatedSecretSchema) });

export const rotatedSchema = z.object({
  source: sourceViewSchema,
  secretId: z.string().describe('The new secret, verifying now.'),
  generatedSecrets: z.array(generatedSecretSchema),
});

export const sourceListSchema = z.object({
  configVersion: z.int().describe('The configuration version: every change bumps it.'),
  sources: z.array(sourceViewSchema),
});

export const auditEntrySchema = z.object({
  id: z.int(),
  at: time,
  actor: z.string().describe('The token name, console:<operator> or cli:<user>.'),
  action: z.string(),
  sourceId: z.string().nullable(),
  configVersion: z.int(),
  diff: z.unknown().describe('The fields changed, from and to; secrets by id, never a value.'),
});

export const auditListSchema = z.object({
  entries: z.array(auditEntrySchema).describe('Newest first.'),
  nextBefore: z.int().optional().describe('Pass as `before` for the next (older) page; absent on the last page.'),
});

export const auditQuerySchema = z.strictObject({
  source: identifier.optional().describe("Only this source's changes."),
  before: z.coerce.number().int().min(1).optional().describe('Only entries older than this id (paging).'),
  limit: z.coerce.number().int().min(1).max(500).default(50).describe('At most this many entries.'),
});

export const instanceSchema = z.object({
  instance: z.string(),
  role: z.string().describe('ingress or worker.'),
  configVersion: z.int().describe('The configuration version it serves.'),
  seenAt: time,
  behind: z.boolean().describe('Serves an older version than the current one.'),
});

export const configSchema = z.object({
  configVersion: z.int(),
  instances: z.array(instanceSchema).describe('The ingresses and workers seen within the last hour.'),
});

export const problemSchema = z.object({ path: z.string(), message: z.string() });

export const errorSchema = z.object({
  error: z.string().describe('A code: invalid, unauthorized, forbidden, not_found, exists, stale_revision, precondition_required, ...'),
  message: z.string().optional(),
  problems: z.array(problemSchema).optional().describe('For invalid input: each field that is wrong (a dotted path) and why.'),
});

// The schemas above describe the domain's own types: a change to either side fails the type check here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameSource: Same<z.output<typeof sourceViewSchema>, SourceView> = true;
const sameEntry: Same<Omit<z.output<typeof auditEntrySchema>, 'diff'>, Omit<AuditEntry, 'diff'>> = true;
void sameSource;
void sameEntry;
