import { z } from 'zod';

export const SUPPORTED_EVENT_VERSIONS = [1] as const;
export type EventVersion = (typeof SUPPORTED_EVENT_VERSIONS)[number];

// Tenant and resource ids become the Kafka key `<tenant>/<type>/<id>`, so '/' and anything
// that would make the key ambiguous or awkward in logs and CLIs is kept out.
export const KEY_SEGMENT_PATTERN = /^[A-Za-z0-9_.-]{1,100}$/;
export const RESOURCE_TYPE_PATTERN = /^[a-z][a-z0-9_]{0,49}$/;
/** The three actions of the contract; anything else (`theme.exploded`) is refused at the door. */
export const EVENT_ACTIONS = ['created', 'updated', 'deleted'] as const;
export const EVENT_TYPE_PATTERN = new RegExp(`^[a-z][a-z0-9_]{0,49}\\.(?:${EVENT_ACTIONS.join('|')})$`);

const keySegment = (what: string) =>
  z
    .string()
    .regex(KEY_SEGMENT_PATTERN, { message: `${what} must match ${KEY_SEGMENT_PATTERN.source}` })
    .meta({ description: `${what}; part of the Kafka key <tenant_id>/<resource.type>/<resource.id>` });

export const resourceSchema = z.strictObject({
  type: z.string().regex(RESOURCE_TYPE_PATTERN).meta({ description: 'Resource type; must equal the <resource> part of event_type' }),
  id: keySegment('Resource id'),
  version: z
    .int()
    .min(0)
    .optional()
    .meta({
      description:
        'Monotonic per resource; the worker applies only versions above the stored one. ' +
        'Required unless the source orders this resource type by occurred_at (then optional, and not used for ordering)',
    }),
});

export const occurredAtSchema = z.iso
  .datetime({ offset: true })
  .meta({ description: 'ISO-8601 time at the producer, with Z or a +HH:MM offset' });

// Strict at the top level: the raw body is forwarded unchanged to Kafka, so a misspelt field
// (`ocurred_at`) or a field from a future contract would otherwise reach every downstream
// consumer without being part of v1.
export const eventEnvelopeSchema = z
  .strictObject({
    event_id: z.string().min(1).max(200).meta({ description: 'Unique per logical event; used for deduplication' }),
    event_type: z.string().regex(EVENT_TYPE_PATTERN).meta({
      description: '<resource type>.created|updated|deleted, for a resource type the source may publish (configured per source)',
    }),
    event_version: z.literal(1).meta({ description: 'Contract version; unknown versions are rejected' }),
    occurred_at: occurredAtSchema,
    delivery_attempt: z.int().min(1).optional(),
    tenant_id: keySegment('Tenant id'),
    idempotency_key: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .meta({ description: 'Business effect key; a re-publish with a new event_id is still a duplicate' }),
    resource: resourceSchema,
    data: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({
        description:
          'Full snapshot of the resource, required unless the action is "deleted" (then absent or {}). ' +
          "The provider's own model, carried through unchanged; for themes a few fields are checked when present " +
          '(theme-snapshot.v1.schema.json).',
      }),
  })
  .superRefine((envelope, ctx) => {
    const [resourcePart, action] = envelope.event_type.split('.');
    if (resourcePart !== envelope.resource.type) {
      ctx.addIssue({
        code: 'custom',
        path: ['resource', 'type'],
        message: `resource.type must be "${resourcePart}" for event_type "${envelope.event_type}"`,
      });
    }
    if (action !== 'deleted' && envelope.data === undefined) {
      ctx.addIssue({ code: 'custom', path: ['data'], message: `data is required for ${envelope.event_type}` });
    }
  })
  .meta({
    title: 'Webhook event envelope v1',
    description: 'Body of every webhook POSTed to the bridge. Snapshots, not deltas.',
  });

/** An envelope as received: `resource.version` may be absent (a source ordering by occurred_at). */
export type ReceivedEnvelope = z.infer<typeof eventEnvelopeSchema>;
/** An envelope that carries its resource version, as every version-ordered source's does (and the samples build). */
export type EventEnvelope = ReceivedEnvelope & { resource: { version: number } };
export type EventAction = 'upsert' | 'delete';

export type EventVersionCheck =
  { ok: true; version: EventVersion } | { ok: false; code: 'unknown_event_version' | 'invalid_envelope'; message: string };

/**
 * Runs before the full envelope check: a future version may have a different shape, and must be
 * reported as unknown (422 / DLQ `unknown_event_version`), never as a malformed v1 envelope.
 */
export function checkEventVersion(input: unknown): EventVersionCheck {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, code: 'invalid_envelope', message: 'envelope must be a JSON object' };
  }
  if (!Object.hasOwn(input, 'event_version')) {
    return { ok: false, code: 'invalid_envelope', message: 'event_version is required' };
  }
  const version: unknown = (input as Record<string, unknown>)['event_version'];
  if (!Number.isSafeInteger(version)) {
    return { ok: false, code: 'invalid_envelope', message: 'event_version must be an integer' };
  }
  if (!(SUPPORTED_EVENT_VERSIONS as readonly unknown[]).includes(version)) {
    return {
      ok: false,
      code: 'unknown_event_version',
      message: `event_version ${String(version)} is not supported (supported: ${SUPPORTED_EVENT_VERSIONS.join(', ')})`,
    };
  }
  return { ok: true, version: version as EventVersion };
}

export function resourceKey(envelope: Pick<ReceivedEnvelope, 'tenant_id' | 'resource'>): string {
  return `${envelope.tenant_id}/${envelope.resource.type}/${envelope.resource.id}`;
}

export function eventAction(envelope: Pick<ReceivedEnvelope, 'event_type'>): EventAction {
  return envelope.event_type.endsWith('.deleted') ? 'delete' : 'upsert';
}
