import { withTransaction } from '#plumbing/db/transaction.ts';
import type { RecordHeaders } from '#plumbing/kafka/headers.ts';
import type { Kafka } from '#plumbing/kafka/types.ts';
import type { Pool } from 'pg';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import { parseEvent, type ReceivedEnvelope } from '#domain/contract/index.ts';
import { eventOrdering, traceIdHeader } from '#domain/contract/event-headers.ts';
import { deliveryAttemptOf, ORDERING_MISMATCH, QUARANTINE_REASON, type ApplyResult, type SourceRecord } from '#domain/apply/index.ts';
import {
  classifyFailure,
  decodeRetryInfo,
  encodeDeadLetterInfo,
  encodeRetryInfo,
  originalHeaders,
  permanentFailure,
  retryDelayMs,
  truncateUtf8,
  type ClassifiedFailure,
  type FailureMetrics,
  type RetrySchedule,
} from '#domain/failures/index.ts';
import { markAnomalyDeadLettered } from '#domain/store/anomalies.ts';
import { insertFailedEvent, recordPendingFailure } from '#domain/store/inbox.ts';
import { selectResourceVersion } from '#domain/store/state.ts';
import { createRecoveringProducer } from '#plumbing/kafka/producers.ts';
import type { RecoveringProducer } from '#plumbing/kafka/recovering-producer.ts';

export const RETRIES_EXHAUSTED = 'retries_exhausted';

export type FailureOutcome =
  | { outcome: 'retry'; topic: string; attempt: number; notBefore: Date; failure: ClassifiedFailure }
  | { outcome: 'dead_lettered'; topic: string; reason: string; attempt: number; failure: ClassifiedFailure }
  | { outcome: 'stale'; storedVersion: number; attempt: number; failure: ClassifiedFailure }
  /** Nothing was routed: the caller must pause, not resolve the record, and let it be fetched again. */
  | { outcome: 'outage'; failure: ClassifiedFailure };

export interface RetryRouterOptions {
  producer: RecoveringProducer;
  pool: Pool;
  names: TopicNames;
  schedule: RetrySchedule;
  produceTimeoutMs: number;
  metrics: FailureMetrics;
  logger: Logger;
  clock?: () => Date;
  random?: () => number;
}

/**
 * Idempotent producers (acks=-1 forced, one request in flight, the Java-compatible partitioner),
 * one after another: each is replaced after a failed or timed-out send.
 */
export function createFailureProducer(kafka: Kafka, logger: Logger, connectTimeoutMs = 10_000): RecoveringProducer {
  return createRecoveringProducer(kafka, { name: 'failures', logger, connectTimeoutMs });
}

/**
 * Sends a failed record to the next retry topic or the DLQ, after checking its resource has not
 * moved past it meanwhile, and records that in the inbox. Throws when producing fails: the
 * caller must then not commit the record's offset, so it is redelivered instead of lost.
 */
export class RetryRouter {
  readonly #o: RetryRouterOptions;
  readonly #clock: () => Date;
  readonly #random: () => number;

  constructor(options: RetryRouterOptions) {
    this.#o = options;
    this.#clock = options.clock ?? (() => new Date());
    this.#random = options.random ?? Math.random;
  }

  /** Classifies an error thrown while applying `record` and routes it. */
  async handleError(record: SourceRecord, error: unknown): Promise<FailureOutcome> {
    return this.route(record, classifyFailure(error));
  }

  /** Routes an apply result that is itself a permanent failure (invalid, quarantined, ordering_mismatch); undefined otherwise. */
  async handleResult(result: ApplyResult): Promise<FailureOutcome | undefined> {
    if (result.outcome === 'invalid') {
      return this.route(
        result.record,
        permanentFailure(result.error?.code ?? 'invalid_envelope', result.error?.message ?? 'invalid event'),
      );
    }
    if (result.outcome === 'quarantined') {
      return this.route(result.record, permanentFailure('quarantined', result.reason ?? QUARANTINE_REASON));
    }
    if (result.outcome === ORDERING_MISMATCH) {
      return this.route(result.record, permanentFailure(ORDERING_MISMATCH, result.reason ?? 'event and resource ordered differently'));
    }
    return undefined;
  }

  async route(record: SourceRecord, failure: ClassifiedFailure): Promise<FailureOutcome> {
    const { metrics, names, logger } = this.#o;
    metrics.failures.inc({ class: failure.class, code: failure.code });
    if (failure.class === 'outage') return { outcome: 'outage', failure };

    const previous = decodeRetryInfo(record.headers);
    const attempt = (previous.ok ? previous.info.attempt : 0) + 1;
    const parsed = record.value ? parseEvent(record.value) : undefined;
    const envelope = parsed?.ok ? parsed.envelope : undefined;
    const bodySha256 = parsed?.bodySha256 ?? '';

    const level = attempt;
    const toRetry = failure.class === 'transient' && level <= names.retries.length;
    const reason = failure.class === 'permanent' ? failure.code : RETRIES_EXHAUSTED;
    const now = this.#clock();

    // Version-aware: a resource that already holds this version or a later one makes the event
    // moot, so it resolves as stale instead of waiting in the chain or the DLQ.
    const log = logger.child({
      topic: record.topic,
      partition: record.partition,
      offset: record.offset,
      event_id: envelope?.event_id,
      attempt,
      failure_class: failure.class,
      failure_code: failure.code,
      trace_id: traceIdHeader(record.headers),
    });
    let stale: number | undefined;
    try {
      stale = await this.#recordFailure(record, envelope, bodySha256, failure, attempt, toRetry ? 'retrying' : 'dead_lettered', reason);
    } catch (error) {
      // Without the database the failure cannot be checked or recorded: that is an outage, and an
      // outage must never push events down the chain.
      const dbFailure = classifyFailure(error);
      log.warn({ err: error, db_failure_code: dbFailure.code }, 'failure bookkeeping failed; treating as an outage');
      return { outcome: 'outage', failure: { ...dbFailure, class: 'outage' } };
    }
    if (stale !== undefined) {
      metrics.staleOnFailure.inc();
      log.info({ outcome: 'stale', stored_version: stale }, 'failed event resolved as stale: its resource has moved on');
      return { outcome: 'stale', storedVersion: stale, attempt, failure };
    }

    const first = previous.ok ? previous.info : undefined;
    const base = {
      attempt,
      firstFailureAt: first?.firstFailureAt ?? now,
      lastErrorCode: failure.code,
      lastErrorMessage: failure.message,
      originalTopic: first?.originalTopic ?? record.topic,
      originalPartition: first?.originalPartition ?? record.partition,
      originalOffset: first?.originalOffset ?? record.offset,
    };
    if (toRetry) {
      const topic = names.retries[level - 1]!;
      const notBefore = new Date(now.getTime() + retryDelayMs(this.#o.schedule, level, this.#random));
      await this.#produce(topic, record, encodeRetryInfo({ ...base, notBefore }));
      metrics.retries.inc({ attempt: String(level) });
      log.info({ outcome: 'retrying', retry_topic: topic, not_before: notBefore.toISOString() }, 'event sent to retry topic');
      return { outcome: 'retry', topic, attempt, notBefore, failure };
    }
    await this.#produce(names.dlq, record, encodeDeadLetterInfo({ ...base, reason, deadLetteredAt: now, failedTopic: record.topic }));
    metrics.deadLetters.inc({ reason });
    log.warn({ outcome: 'dead_lettered', reason, error_message: truncateUtf8(failure.message, 200) }, 'event dead-lettered');
    return { outcome: 'dead_lettered', topic: names.dlq, reason, attempt, failure };
  }

  /** Returns the stored version when the event is stale, else records the failure in the inbox. */
  async #recordFailure(
    record: SourceRecord,
    envelope: ReceivedEnvelope | undefined,
    bodySha256: string,
    failure: ClassifiedFailure,
    attempt: number,
    status: 'retrying' | 'dead_lettered',
    reason: string,
  ): Promise<number | undefined> {
    if (envelope === undefined) return undefined; // Unparseable: nothing to key an inbox row on.
    const { pool } = this.#o;
    if (failure.code === 'quarantined') {
      // The anomaly is the news: it goes to the DLQ whatever the resource's version.
      await markAnomalyDeadLettered(pool, { tenant_id: envelope.tenant_id, event_id: envelope.event_id, body_sha256: bodySha256 });
      return undefined;
    }
    return withTransaction(pool, async (client) => {
      const storedVersion = await selectResourceVersion(client, {
        tenant_id: envelope.tenant_id,
        resource_type: envelope.resource.type,
        resource_id: envelope.resource.id,
      });
      // By version only: an event ordered by occurred_at goes on down the chain and is decided when it applies.
      const version = eventOrdering(record.headers, envelope) === 'version' ? envelope.resource.version : undefined;
      const isStale = storedVersion !== undefined && version !== undefined && storedVersion >= version;
      const rowStatus = isStale ? 'stale' : status;
      // The operator reading the inbox row (trace, console) sees both orderings, not only the code.
      const rowReason = isStale
        ? `stored version ${storedVersion} (after ${failure.code})`
        : failure.code === ORDERING_MISMATCH
          ? `${reason}: ${failure.message}`
          : reason;
      const lastError = truncateUtf8(`${failure.code}: ${failure.message}`);
      const updated = await recordPendingFailure(client, {
        tenant_id: envelope.tenant_id,
        event_id: envelope.event_id,
        body_sha256: bodySha256,
        status: rowStatus,
        reason: rowReason,
        attempts: attempt,
        last_error: lastError,
        trace_id: traceIdHeader(record.headers) ?? null,
      });
      if (updated === 0) {
        await insertFailedEvent(client, {
          event_id: envelope.event_id,
          idempotency_key: envelope.idempotency_key ?? null,
          tenant_id: envelope.tenant_id,
          resource_type: envelope.resource.type,
          resource_id: envelope.resource.id,
          resource_version: envelope.resource.version,
          event_type: envelope.event_type,
          status: rowStatus,
          reason: rowReason,
          attempts: attempt,
          last_error: lastError,
          body_sha256: bodySha256,
          payload: record.value!.toString('utf8'),
          source_topic: record.topic,
          source_partition: record.partition,
          source_offset: record.offset,
          occurred_at: envelope.occurred_at,
          received_at: null,
          delivery_attempt: deliveryAttemptOf(record, envelope) ?? null,
          trace_id: traceIdHeader(record.headers) ?? null,
        });
      }
      return isStale ? storedVersion : undefined;
    });
  }

  async #produce(topic: string, record: SourceRecord, failureHeaders: Record<string, string>): Promise<void> {
    const headers: RecordHeaders = { ...(originalHeaders(record.headers) as RecordHeaders), ...failureHeaders };
    const key = record.key === null ? null : Buffer.isBuffer(record.key) ? record.key : Buffer.from(record.key);
    // A failed or timed-out send replaces the producer (RecoveringProducer explains why).
    await this.#o.producer.use(
      (producer) =>
        producer.send({
          topic,
          acks: -1,
          // The body is forwarded byte for byte: a replay must feed exactly what the provider sent.
          // Without a key the partition number is kept (every topic of the set has the same count).
          messages: [{ key, value: record.value, headers, ...(key === null ? { partition: record.partition } : {}) }],
        }),
      this.#o.produceTimeoutMs,
      'failure_produce_timeout',
      `produce to ${topic}`,
    );
  }
}
