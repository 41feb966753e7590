import { retryDelayMs, type RetrySchedule } from '#domain/failures/index.ts';
import type { PullStatus } from '#domain/store/index.ts';
import type { ReconcileOutcome } from './reconciler.ts';

/** What happened to one attempt of a pull the worker owes: a report's outcome, or `error` (it threw). */
export interface PullAttempt {
  outcome: ReconcileOutcome | 'error';
  /** Whether a `failed` attempt may succeed later (a timeout, a 5xx), as the client classified it. */
  retryable: boolean;
  /** The stored state is a tombstone (a `gone` then agrees with it). */
  storedDeleted?: boolean;
}

export type PullRecordChange =
  | { kind: 'resolved' }
  | { kind: 'attempted'; status: Exclude<PullStatus, 'pending'>; attempts: number; dueInMs: number | null; exhausted: boolean };

/**
 * What the durable record of a pull becomes after an attempt. Applied and stale answer the
 * question, and so does a 404/410 for a resource stored as deleted: the record goes. A 404/410 without a version is `gone` and a refused answer (contract,
 * strict schema, implausible version, a non-retryable HTTP answer) is `failed`: both wait for an
 * operator, never retried on their own. Transient failures are retried on the retry chain's
 * schedule (the same delays and jitter as a failing event), and after its last level the record
 * is `failed`, as an event would be dead-lettered.
 */
export function pullRecordChange(
  attempt: PullAttempt,
  attemptsBefore: number,
  schedule: RetrySchedule,
  random?: () => number,
): PullRecordChange {
  const attempts = attemptsBefore + 1;
  switch (attempt.outcome) {
    case 'applied':
    case 'stale':
      return { kind: 'resolved' };
    case 'gone':
      // A 404 for a resource the bridge already holds as deleted agrees with it: nothing to look at.
      if (attempt.storedDeleted === true) return { kind: 'resolved' };
      return { kind: 'attempted', status: 'gone', attempts, dueInMs: null, exhausted: false };
    case 'invalid':
    case 'implausible':
      return { kind: 'attempted', status: 'failed', attempts, dueInMs: null, exhausted: false };
    case 'failed':
    case 'circuit_open':
    case 'error': {
      const retryable = attempt.outcome !== 'failed' || attempt.retryable;
      if (!retryable) return { kind: 'attempted', status: 'failed', attempts, dueInMs: null, exhausted: false };
      if (attempts > schedule.delaysMs.length) return { kind: 'attempted', status: 'failed', attempts, dueInMs: null, exhausted: true };
      return { kind: 'attempted', status: 'retrying', attempts, dueInMs: retryDelayMs(schedule, attempts, random), exhausted: false };
    }
  }
}
