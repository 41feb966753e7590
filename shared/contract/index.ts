export {
  checkEventVersion,
  eventAction,
  eventEnvelopeSchema,
  EVENT_TYPE_PATTERN,
  KEY_SEGMENT_PATTERN,
  RESOURCE_TYPE_PATTERN,
  resourceKey,
  resourceSchema,
  SUPPORTED_EVENT_VERSIONS,
} from './envelope.ts';
export type { EventAction, EventEnvelope, EventVersion, EventVersionCheck } from './envelope.ts';
export {
  isValidTimeZone,
  themeAssetSchema,
  themeLayoutSchema,
  themePaletteSchema,
  themeSnapshotSchema,
} from './theme-snapshot.ts';
export type { ThemeSnapshot } from './theme-snapshot.ts';
export { checkStructure, DEFAULT_MAX_DEPTH, findDuplicateKey, FORBIDDEN_KEYS, parseEvent } from './parse-event.ts';
export type { ParseErrorCode, ParseEventOptions, ParseEventResult } from './parse-event.ts';
export { sampleThemeEvent, sampleThemeSnapshot } from './sample.ts';
export type { SampleThemeEventOverrides } from './sample.ts';
export { renderJsonSchemas, SCHEMAS_DIRECTORY } from './json-schema.ts';
export type { SchemaFile } from './json-schema.ts';
