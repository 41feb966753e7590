import type { ApplyResult, SourceRecord } from '#domain/apply/index.ts';

// The contract between the apply loop (the worker's batch handler) and the failure path (retry
// topics, DLQ, outage pause): the loop reports what it could not apply, the failure path answers
// whether the record's offset may be committed.

/** `handled`: the record is dealt with (e.g. sent to a retry topic or the DLQ); its offset may be committed.
 * `stop`: leave this record and the rest of the batch unresolved (they are fetched again), e.g. during
 * an outage after pausing. Throwing stops the batch the same way and surfaces the error to kafkajs. */
export type FailureDecision = 'handled' | 'stop';

export interface FailureContext {
  /** `invalid`: the record failed the contract (permanent). `apply`: its transaction failed. */
  stage: 'invalid' | 'apply';
  /** Pauses this record's topic-partition; call the returned function to resume it. */
  pausePartition: () => () => void;
}

export type OnFailure = (record: SourceRecord, error: unknown, context: FailureContext) => Promise<FailureDecision | void>;
export type OnQuarantined = (result: ApplyResult) => Promise<void>;

/** Without a failure path (tests, benchmarks): a failed record stops the partition and the error surfaces. */
export const rethrowFailure: OnFailure = async (_record, error) => {
  throw error;
};
