export {
  checkEventVersion,
  eventAction,
  EVENT_ACTIONS,
  eventEnvelopeSchema,
  EVENT_TYPE_PATTERN,
  KEY_SEGMENT_PATTERN,
  RESOURCE_TYPE_PATTERN,
  resourceKey,
  resourceSchema,
  SUPPORTED_EVENT_VERSIONS,
} from './envelope.ts';
export type { EventAction, EventEnvelope, EventVersion, EventVersionCheck, ReceivedEnvelope } from './envelope.ts';
export {
  CHECKSUM_PATTERN,
  COLOUR_PATTERN,
  isValidTimeZone,
  themeAssetSchema,
  themeLayoutSchema,
  themePaletteSchema,
  themeSnapshotSchema,
} from './theme-snapshot.ts';
export type { ThemeSnapshot } from './theme-snapshot.ts';
export {
  checkStructure,
  DEFAULT_MAX_DEPTH,
  findDuplicateKey,
  FORBIDDEN_KEYS,
  isStorableString,
  MAX_SUPPORTED_DEPTH,
  parseEvent,
} from './parse-event.ts';
export { DELIVERY_ONLY_FIELDS, eventFingerprint, storedBodyFingerprint } from './fingerprint.ts';
export type { ParseErrorCode, ParseEventOptions, ParseEventResult } from './parse-event.ts';
export { contractExampleEvent, sampleThemeEvent, sampleThemeSnapshot } from './sample.ts';
export type { SampleThemeEventOverrides } from './sample.ts';
export { renderJsonSchemas, SCHEMAS_DIRECTORY } from './json-schema.ts';
export type { SchemaFile } from './json-schema.ts';
export { EVENT_HEADERS } from './event-headers.ts';
export { appliedRecordSchema } from './applied-record-schema.ts';
export type { AppliedRecord } from './applied-record-schema.ts';
