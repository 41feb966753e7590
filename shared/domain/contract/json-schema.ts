import { z } from 'zod';
import { appliedRecordSchema } from './applied-record-schema.ts';
import { eventEnvelopeSchema } from './envelope.ts';
import { themeSnapshotSchema } from './theme-snapshot.ts';

export interface SchemaFile {
  fileName: string;
  content: string;
}

export const SCHEMAS_DIRECTORY = new URL('./schemas/', import.meta.url);

// Refinements (IANA time zone, resource.type matching event_type, data required unless
// deleted) cannot be expressed here; the schemas carry them as descriptions.
export function renderJsonSchemas(): SchemaFile[] {
  return [
    { fileName: 'envelope.v1.schema.json', content: render(eventEnvelopeSchema) },
    { fileName: 'theme-snapshot.v1.schema.json', content: render(themeSnapshotSchema) },
    { fileName: 'applied-record.v1.schema.json', content: render(appliedRecordSchema) },
  ];
}

function render(schema: z.ZodType): string {
  return `${JSON.stringify(z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }), null, 2)}\n`;
}
