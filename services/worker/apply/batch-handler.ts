import type { EachBatchPayload } from '#plumbing/kafka/types.ts';
import { refusedByGroup } from '#plumbing/kafka/groups.ts';
import { toSourceRecord, type ApplyResult, type SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import type { FailureContext, OnFailure, OnQuarantined } from '#domain/failures/index.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { CrashPoints } from '../crash-points.ts';
import type { WorkerMetrics } from '../metrics.ts';

export interface BatchHandlerOptions {
  applier: SnapshotApplier;
  /** How a chunk is applied in one transaction: the worker's ApplyCoalescer, which merges the chunks
   * of concurrent partitions into one transaction (and observes its duration). `applier` applies
   * the records of a failed chunk one by one. */
  applyChunk: (chunk: readonly SourceRecord[]) => Promise<ApplyResult[]>;
  batchSize: number;
  logger: Logger;
  metrics: WorkerMetrics;
  crashPoints: CrashPoints;
  onFailure: OnFailure;
  onQuarantined?: OnQuarantined;
  /** After each committed apply transaction (wakes the outbox relay). */
  afterCommit?: () => void;
  /** The committed results, before their offsets are resolved (queues reconciliations; must not block). */
  afterApply?: (results: readonly ApplyResult[]) => void;
  /** The shared offset commits; the worker awaits their settling before the consumer leaves. */
  commits?: CoalescedCommits;
  /**
   * The worker is shutting down (worker.close() has begun). kafkajs still reports the consumer as
   * running until its disconnect starts, and close() waits only for the commits it sees before
   * disconnecting: a batch that ends in between waits for its own commit instead of leaving it in
   * the background, where it would run after the consumer left the group.
   */
  stopping?: () => boolean;
  /**
   * How many times the consumer has joined its group. A commit's refusal is raised only within the
   * membership that asked for the commit: once kafkajs has re-joined (by itself, after a heartbeat
   * the group refused), a late refusal of the old membership's commit would only make the group
   * rebalance again.
   */
  joins?: () => number;
}

/**
 * kafkajs eachBatch handler (eachBatchAutoResolve: false, autoCommit: false). The fetched batch is
 * applied in chunks of `batchSize`, one Postgres transaction per chunk; an offset is resolved and
 * committed only after its record's transaction has committed (or its failure was handled).
 */
export function createBatchHandler(options: BatchHandlerOptions): (payload: EachBatchPayload) => Promise<void> {
  const { applier, applyChunk, batchSize, logger, metrics, crashPoints, onFailure } = options;
  // The per-event line carries only the fixed scalar fields below, none of them secret, so it
  // skips the base logger's wildcard redaction (about half the cost of each line).
  const eventLogger = logger.child({}, { redact: [] });
  const shareCommit = options.commits ?? coalescedCommits();
  // A background commit the group refused (see refusedByGroup): raised by the next chunk, as
  // kafkajs's own commit would have raised it, so that kafkajs re-joins the group.
  const joins = options.joins ?? (() => 0);
  let refusal: { error: unknown; joins: number } | undefined;

  return async (payload) => {
    const { batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, uncommittedOffsets, isRunning, isStale } = payload;
    const records = batch.messages.map((m) => toSourceRecord(batch.topic, batch.partition, m));
    const commit = () => shareCommit(() => commitOffsetsIfNecessary(uncommittedOffsets()));
    const commitSoon = () => {
      const askedIn = joins();
      commit().catch((error: unknown) => {
        if (refusedByGroup(error)) {
          if (askedIn !== joins()) return;
          refusal ??= { error, joins: askedIn };
          logger.warn({ err: error }, 'offset commit refused by the group; re-joining before the next chunk');
        } else logger.warn({ err: error }, 'offset commit failed; the next commit carries its offsets');
      });
    };

    const observe = (result: ApplyResult, committedAt: number) => {
      const { record } = result;
      metrics.processed.inc({ outcome: result.outcome });
      if (result.outcome === 'duplicate') metrics.duplicates.inc();
      if (result.outcome === 'stale') metrics.stale.inc();
      if (result.versionGap) metrics.versionGaps.inc();
      if (record.timestamp !== undefined) metrics.latency.observe(Math.max(0, committedAt - Number(record.timestamp)) / 1000);
      const fields = {
        event_id: result.eventId,
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        outcome: result.outcome,
        resource_key: result.resourceKey,
        version: result.version,
        stored_version: result.storedVersion,
        body_sha256: result.bodySha256,
        reason: result.reason,
        trace_id: result.traceId,
      };
      if (result.outcome === 'quarantined') eventLogger.warn(fields, 'anomaly: event_id seen before with different content');
      else if (result.outcome === 'ordering_mismatch') eventLogger.warn(fields, "event of the other ordering than its resource's");
      else if (result.outcome === 'invalid') eventLogger.warn(fields, 'invalid event');
      else eventLogger.info(fields, 'event processed');
    };

    const fail = async (record: SourceRecord, error: unknown, stage: FailureContext['stage']): Promise<boolean> => {
      const decision = await onFailure(record, error, { stage, pausePartition: payload.pause });
      if (decision === 'stop') return false;
      resolveOffset(record.offset);
      return true;
    };

    // Returns false when the rest of the fetched batch must be left for a later fetch.
    const settle = async (result: ApplyResult): Promise<boolean> => {
      if (result.outcome === 'invalid') return fail(result.record, result.error, 'invalid');
      // Both go to the DLQ through the same hook: an anomaly, and an event whose ordering is not
      // its resource's (it waits there for an operator's switch, then a replay).
      if (result.outcome === 'quarantined' || result.outcome === 'ordering_mismatch') await options.onQuarantined?.(result);
      resolveOffset(result.record.offset);
      return true;
    };

    const processChunk = async (chunk: SourceRecord[]): Promise<boolean> => {
      let results: ApplyResult[] | undefined;
      try {
        results = await applyChunk(chunk);
      } catch (error) {
        // One bad record must not hold back the others: retry the chunk one record per transaction.
        logger.warn({ err: error, partition: batch.partition, records: chunk.length }, 'chunk transaction failed; applying one by one');
      }
      if (results) {
        crashPoints.reach('after-commit-before-offset');
        options.afterCommit?.();
        const committedAt = Date.now();
        for (const result of results) observe(result, committedAt);
        options.afterApply?.(results);
        for (const result of results) if (!(await settle(result))) return false;
        return true;
      }
      for (const record of chunk) {
        let result: ApplyResult;
        try {
          result = await applier.apply(record);
        } catch (error) {
          logger.warn({ err: error, topic: record.topic, partition: record.partition, offset: record.offset }, 'apply failed');
          if (!(await fail(record, error, 'apply'))) return false;
          await heartbeat();
          continue;
        }
        crashPoints.reach('after-commit-before-offset');
        options.afterCommit?.();
        observe(result, Date.now());
        options.afterApply?.([result]);
        if (!(await settle(result))) return false;
        // One transaction per record can outlast the session timeout for a whole chunk: without a
        // heartbeat the member is evicted, its commit refused, and the chunk fetched again forever.
        await heartbeat();
      }
      return true;
    };

    try {
      for (let start = 0; start < records.length; start += batchSize) {
        // Shutdown or rebalance: stop between chunks; everything resolved so far is durable.
        if (!isRunning() || isStale()) break;
        if (refusal !== undefined) {
          const { error, joins: refusedIn } = refusal;
          refusal = undefined;
          if (refusedIn === joins()) throw error;
        }
        const keepGoing = await processChunk(records.slice(start, start + batchSize));
        // As commitAsync in a Java consumer's poll loop: the next fetch does not wait for the
        // OffsetCommit round trip. A crash before it lands only redelivers events the inbox
        // deduplicates; a failed commit is carried by the next one (the offsets stay uncommitted).
        commitSoon();
        const last = records[Math.min(start + batchSize, records.length) - 1]!;
        metrics.queueLag.set({ partition: String(batch.partition) }, Math.max(0, Number(batch.highWatermark) - Number(last.offset) - 1));
        if (!keepGoing) break;
        await heartbeat();
      }
      // Stopping or revoked: wait for the commit (commitSync on close), so what is applied is
      // committed before the consumer leaves its group.
      if (!isRunning() || isStale() || options.stopping?.()) await commit();
    } catch (error) {
      // Commit what is durable before the error surfaces, so a restart does not redo it; unless the
      // group refuses this member's commits anyway (it re-joins, and the inbox drops the repeats).
      if (!refusedByGroup(error)) await commit().catch(() => {});
      throw error;
    }
  };
}

/**
 * Offset commits of the concurrent eachBatch calls share requests. kafkajs commits the resolved
 * offsets of every partition in one OffsetCommit (uncommittedOffsets is the whole group's), so
 * while one commit is in flight the callers wait for a single next one, which carries whatever
 * they resolved meanwhile, instead of sending one request each (at a low rate, a commit or more per
 * event). A caller's offsets are committed when its promise resolves, as before.
 *
 * `minIntervalMs` spaces the commits out, as a Java consumer's auto.commit.interval.ms does: a
 * commit asked for sooner than that after the previous one started waits for the rest of the
 * interval, and everyone who asks meanwhile shares it. Nothing waits for it on the way to the next
 * fetch; a crash in between only redelivers events the inbox deduplicates. Each OffsetCommit is an
 * append to __consumer_offsets, so fewer of them spare the broker.
 */
export interface CoalescedCommits {
  (commit: () => Promise<void>): Promise<void>;
  /** Resolves once the commits sent or waiting now have ended (whatever their outcome). */
  settled(): Promise<void>;
}

export function coalescedCommits(options: { minIntervalMs?: number } = {}): CoalescedCommits {
  const minIntervalMs = options.minIntervalMs ?? 0;
  let inFlight: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  let lastStartedAt = Number.NEGATIVE_INFINITY;
  const untilDue = () => lastStartedAt + minIntervalMs - performance.now();
  const run = (commit: () => Promise<void>): Promise<void> => {
    lastStartedAt = performance.now();
    const attempt: Promise<void> = commit().finally(() => {
      if (inFlight === attempt) inFlight = undefined;
    });
    inFlight = attempt;
    return attempt;
  };
  const share = (commit: () => Promise<void>): Promise<void> => {
    if (next !== undefined) return next;
    if (inFlight === undefined && untilDue() <= 0) return run(commit);
    next = (inFlight ?? Promise.resolve())
      .catch(() => {})
      .then(() => {
        const wait = untilDue();
        return wait > 0 ? new Promise<void>((resolve) => setTimeout(resolve, Math.ceil(wait))) : undefined;
      })
      .then(() => {
        next = undefined;
        return run(commit);
      });
    return next;
  };
  return Object.assign(share, {
    settled: () =>
      (next ?? inFlight ?? Promise.resolve()).then(
        () => {},
        () => {},
      ),
  });
}
