export {
  DEFAULT_MAX_VERSION_LEAD,
  DEFAULT_TOLERANCE_SECONDS,
  loadReconcileSources,
  loadSources,
  RECONCILE_PLACEHOLDERS,
  reconcileConfigSchema,
  resolveReconcileSources,
  MIN_HMAC_SECRET_BYTES,
  orderingOf,
  RESOURCE_ORDERINGS,
  parseSourcesFile,
  resolveSources,
  sourceConfigSchema,
  SourcesConfigError,
  sourcesFileSchema,
} from './sources-config.ts';
export type {
  ReconcileConfig,
  ReconcileSettings,
  ReconcileSource,
  ResolveOptions,
  ResourceOrdering,
  SourceConfig,
  SourcesFile,
  WebhookSource,
} from './sources-config.ts';
export { loadStrictSchema } from './strict-schemas.ts';
export type { StrictSchema } from './strict-schemas.ts';
