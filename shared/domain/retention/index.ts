export { defaultRetentionSettings, effectiveBodyDays, retentionCutoffs, retentionEnv, retentionSettingsFrom } from './config.ts';
export type { RetentionCutoffs, RetentionEnv, RetentionSettings } from './config.ts';
export { logRetentionRun, RetentionLoop, startRetentionLoop } from './loop.ts';
export type { RetentionLoopOptions, StartRetentionOptions } from './loop.ts';
export { bodyFingerprint, RETENTION_TARGETS, RetentionPruner } from './pruner.ts';
export type {
  RetentionAction,
  RetentionBatch,
  RetentionCount,
  RetentionPlan,
  RetentionPrunerOptions,
  RetentionResult,
  RetentionRunReport,
  RetentionTable,
} from './pruner.ts';
