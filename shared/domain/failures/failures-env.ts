import { z } from 'zod';
import { defaultRetrySchedule, type RetrySchedule } from './backoff.ts';
import { faultInjectSchema, type FaultRule } from './fault-injection.ts';

const positiveInt = z.coerce.number().int().positive();

const delayList = z
  .string()
  .regex(/^\s*\d+(\s*,\s*\d+)*\s*$/, 'RETRY_DELAYS_MS must be comma-separated milliseconds, e.g. 5000,30000,120000,600000')
  .transform((text) => text.split(',').map((d) => Number(d.trim())));

/** The failure-handling part of the worker's config schema (merge it into the worker's). */
export const failuresEnv = z.object({
  RETRY_DELAYS_MS: delayList.prefault(defaultRetrySchedule.delaysMs.join(',')),
  RETRY_JITTER: z.coerce.number().min(0).max(1).default(defaultRetrySchedule.jitter),
  /** Bound on a produce to a retry topic or the DLQ; an idempotent kafkajs producer may otherwise wait forever. */
  RETRY_PRODUCE_TIMEOUT_MS: positiveInt.default(15_000),
  OUTAGE_PROBE_INITIAL_MS: positiveInt.default(250),
  OUTAGE_PROBE_MAX_MS: positiveInt.default(10_000),
  FAULT_INJECT: faultInjectSchema,
});

export type FailuresEnv = z.infer<typeof failuresEnv>;

export interface FailureSettings {
  schedule: RetrySchedule;
  produceTimeoutMs: number;
  probeInitialMs: number;
  probeMaxMs: number;
  faults: FaultRule[];
}

export function failureSettingsFrom(env: FailuresEnv): FailureSettings {
  return {
    schedule: { delaysMs: env.RETRY_DELAYS_MS, jitter: env.RETRY_JITTER },
    produceTimeoutMs: env.RETRY_PRODUCE_TIMEOUT_MS,
    probeInitialMs: env.OUTAGE_PROBE_INITIAL_MS,
    probeMaxMs: Math.max(env.OUTAGE_PROBE_MAX_MS, env.OUTAGE_PROBE_INITIAL_MS),
    faults: env.FAULT_INJECT,
  };
}

export const defaultFailureSettings: FailureSettings = failureSettingsFrom(failuresEnv.parse({}));
