import { z } from 'zod';
import { occurredAtSchema } from './envelope.ts';

// The value of a record on the applied topic: what downstream teams build state from. The apply
// path writes it with serializeAppliedRecord (shared/domain/apply/applied-record.ts), whose unit
// test checks its output against this schema; the JSON Schema and the AsyncAPI document come from it.
export const appliedRecordSchema = z
  .strictObject({
    event_id: z.string().min(1).meta({ description: 'The event that made this change (unique per tenant)' }),
    tenant_id: z.string().min(1),
    resource: z.strictObject({
      type: z.string().min(1),
      id: z.string().min(1),
      version: z
        .number()
        .int()
        .optional()
        .meta({ description: "The provider's version this state has; absent when the event carried none (ordered_by occurred_at)" }),
    }),
    ordered_by: z
      .literal('occurred_at')
      .optional()
      .meta({
        description:
          "What ordered this change when it was not the version: the source orders this resource type by the provider's occurred_at " +
          '(a later occurred_at applies; the same instant or an earlier one is stale). Absent: ordered by resource.version',
      }),
    action: z.enum(['upsert', 'delete']).meta({ description: 'upsert: created or updated; delete: a tombstone (data is null)' }),
    data: z
      .record(z.string(), z.unknown())
      .nullable()
      .meta({ description: 'The full snapshot as the provider sent it (null for a delete)' }),
    occurred_at: occurredAtSchema.meta({ description: "The provider's time of the change, as it sent it" }),
    applied_at: z.iso.datetime().meta({ description: 'When the bridge committed it to Postgres (UTC)' }),
  })
  .meta({ title: 'Applied record', description: 'Value of a record on the applied (compacted) topic, key <tenant>/<type>/<id>' });

/** What buildAppliedRecord returns, taken from the schema so the code and the published schemas cannot drift. */
export type AppliedRecord = z.infer<typeof appliedRecordSchema>;
