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
export { CatalogError, SourceCatalog, specChanges } from './catalog.ts';
export type { Actor, AuditEntry, FieldChange, PlannedChange, SecretView, SourceView } from './catalog.ts';
export { DEFAULT_CONFIG_POLL_MS, LiveSources, loadLiveSnapshot } from './live.ts';
export type { LiveSnapshot, LiveSourcesOptions } from './live.ts';
export { generateSecret, keyringFromEnv, openSecret, sealSecret, SecretKeyError } from './secret-box.ts';
export type { SecretKeyring } from './secret-box.ts';
export {
  desiredFromFile,
  parseInput,
  rotateSchema,
  secretInputSchema,
  sourceCreateSchema,
  SourceInputError,
  sourceUpdateSchema,
  storedSourceSchema,
  toReconcileSource,
  toWebhookSource,
} from './source-spec.ts';
export type { DesiredSource, FieldProblem, RotateInput, SecretInput, SourceCreate, StoredSource } from './source-spec.ts';
export { sourceLimitsSchema } from './sources-config.ts';
export type { SourceLimits } from './sources-config.ts';
export { reconcileSourcesFromDatabase, reconcileSourcesOf, webhookSourcesFromDatabase } from './from-database.ts';
export { createOperatorToken, newOperatorToken, revokeOperatorToken, tokenDigest } from './operator-tokens.ts';
export type { TokenScope } from './operator-tokens.ts';
