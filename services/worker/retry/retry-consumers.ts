import type { Consumer, EachBatchPayload, Kafka } from '#plumbing/kafka/types.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import type { ApplyResult, SourceRecord } from '#domain/apply/index.ts';
import { decodeRetryInfo, permanentFailure, type FailureMetrics } from '#domain/failures/index.ts';
import { toSourceRecord } from '#domain/apply/index.ts';
import { OutageController } from './outage-controller.ts';
import type { FailureOutcome, RetryRouter } from './retry-router.ts';

export interface RetryConsumersOptions {
  kafka: Kafka;
  names: TopicNames;
  /** The main consumer group; level n consumes as `<groupId>.retry.<n>`. */
  groupId: string;
  /** The same apply path as the main consumer (fault injection included). */
  apply: (record: SourceRecord) => Promise<ApplyResult>;
  router: RetryRouter;
  probe: () => Promise<boolean>;
  probeInitialMs: number;
  probeMaxMs: number;
  metrics: FailureMetrics;
  logger: Logger;
  sessionTimeoutMs?: number;
  onApplied?: (result: ApplyResult) => void;
  onCrash?: (error: Error, restart: boolean) => void;
  now?: () => number;
}

export interface RetryConsumers {
  groupIds: string[];
  close: () => Promise<void>;
}

export function retryGroupId(groupId: string, level: number): string {
  return `${groupId}.retry.${level}`;
}

/** One consumer per retry topic, each pausing a partition until its head record is due. */
export async function startRetryConsumers(options: RetryConsumersOptions): Promise<RetryConsumers> {
  const levels = options.names.retries.map((topic, i) => new RetryLevelConsumer(options, topic, i + 1));
  try {
    for (const level of levels) await level.start();
  } catch (error) {
    await Promise.all(levels.map((l) => l.close()));
    throw error;
  }
  return {
    groupIds: levels.map((l) => l.groupId),
    close: async () => {
      await Promise.all(levels.map((l) => l.close()));
    },
  };
}

class RetryLevelConsumer {
  readonly groupId: string;
  readonly #o: RetryConsumersOptions;
  readonly #topic: string;
  readonly #consumer: Consumer;
  readonly #outage: OutageController;
  readonly #log: Logger;
  readonly #timers = new Map<number, NodeJS.Timeout>();
  readonly #now: () => number;

  constructor(options: RetryConsumersOptions, topic: string, level: number) {
    this.#o = options;
    this.#topic = topic;
    this.#now = options.now ?? Date.now;
    this.groupId = retryGroupId(options.groupId, level);
    this.#log = options.logger.child({ component: 'retry-consumer', retry_level: level, topic });
    const sessionTimeout = options.sessionTimeoutMs ?? 30_000;
    this.#consumer = options.kafka.consumer({
      groupId: this.groupId,
      sessionTimeout,
      heartbeatInterval: Math.max(500, Math.floor(sessionTimeout / 10)),
      // Small fetches: a retry topic holds few records and each waits for its own time.
      maxBytesPerPartition: 256 * 1024,
      maxWaitTimeInMs: 1000,
    });
    this.#outage = new OutageController({
      name: `retry.${level}`,
      consumer: this.#consumer,
      topics: [topic],
      probe: options.probe,
      probeInitialMs: options.probeInitialMs,
      probeMaxMs: options.probeMaxMs,
      metrics: options.metrics,
      logger: options.logger,
    });
  }

  async start(): Promise<void> {
    const consumer = this.#consumer;
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      this.#log.error({ err: payload.error, restart: payload.restart }, 'retry consumer crashed');
      this.#o.onCrash?.(payload.error, payload.restart);
    });
    await consumer.connect();
    await consumer.subscribe({ topic: this.#topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: (payload) => this.#eachBatch(payload),
    });
  }

  async #eachBatch({ batch, resolveOffset, heartbeat, pause, isRunning, isStale }: EachBatchPayload): Promise<void> {
    for (const message of batch.messages) {
      if (!isRunning() || isStale() || this.#outage.paused) return;
      const info = decodeRetryInfo(message.headers);
      if (info.ok) {
        const wait = info.info.notBefore.getTime() - this.#now();
        if (wait > 0) {
          // Not due: pause this partition and leave the record unresolved, so it is fetched again
          // on resume. No sleeping inside the handler: heartbeats and other partitions keep going.
          this.#pauseUntilDue(batch.partition, wait, pause);
          return;
        }
      }
      const record = toSourceRecord(batch.topic, batch.partition, message);
      const outcome = await this.#process(record, info.ok ? undefined : info.problem);
      if (outcome?.outcome === 'outage') {
        this.#outage.trip(outcome.failure);
        return;
      }
      // Resolved and committed only once the apply or the routing is durable.
      resolveOffset(message.offset);
      await this.#consumer.commitOffsets([
        { topic: batch.topic, partition: batch.partition, offset: (BigInt(message.offset) + 1n).toString() },
      ]);
      await heartbeat();
    }
  }

  async #process(record: SourceRecord, headerProblem: string | undefined): Promise<FailureOutcome | undefined> {
    const { router } = this.#o;
    if (headerProblem !== undefined) return router.route(record, permanentFailure('invalid_retry_headers', headerProblem));
    let result: ApplyResult;
    try {
      result = await this.#o.apply(record);
    } catch (error) {
      return router.handleError(record, error);
    }
    const failed = await router.handleResult(result);
    if (failed === undefined) {
      this.#o.onApplied?.(result);
      this.#log.info(
        { event_id: result.eventId, outcome: result.outcome, partition: record.partition, offset: record.offset },
        'retried event settled',
      );
    }
    return failed;
  }

  #pauseUntilDue(partition: number, waitMs: number, pause: () => () => void): void {
    const resume = pause();
    clearTimeout(this.#timers.get(partition));
    this.#timers.set(
      partition,
      setTimeout(() => {
        this.#timers.delete(partition);
        // During an outage the whole topic is paused; resuming one partition under that pause
        // would have it fetched, refused by the handler and fetched again, in a tight loop. The
        // outage's own resume (topic-wide) resumes it with the rest.
        if (!this.#outage.paused) resume();
      }, waitMs),
    );
  }

  async close(): Promise<void> {
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    await this.#outage.close();
    await this.#consumer.disconnect().catch((error: unknown) => this.#log.warn({ err: error }, 'retry consumer disconnect failed'));
  }
}
