export {
  DEFAULT_TOLERANCE_SECONDS,
  loadSources,
  MIN_HMAC_SECRET_BYTES,
  parseSourcesFile,
  resolveSources,
  sourceConfigSchema,
  SourcesConfigError,
  sourcesFileSchema,
} from './sources-config.ts';
export type { ResolveOptions, SourceConfig, SourcesFile, WebhookSource } from './sources-config.ts';
export { loadStrictSchema } from './strict-schemas.ts';
export type { StrictSchema } from './strict-schemas.ts';
