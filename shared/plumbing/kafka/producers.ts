import { Partitioners, type Kafka, type Producer } from 'kafkajs';
import type { Logger } from '#plumbing/logging/logger.ts';
import { RecoveringProducer } from './recovering-producer.ts';

export interface IdempotentProducerOptions {
  /** Makes it transactional (the relay): a new producer with the same id fences the old one. */
  transactionalId?: string;
  /** Only with transactionalId; the broker aborts an open transaction older than this. */
  transactionTimeoutMs?: number;
}

/** First retry of a transactional send, in ms (the Java client's ADD_PARTITIONS_RETRY_BACKOFF_MS). */
export const TRANSACTION_RETRY_INITIAL_MS = 20;

/**
 * Kafka's default partitioner (the Java client's murmur2 of the key), for a producer built outside
 * createIdempotentProducer (a test's or a benchmark's): its keys land where the bridge's would.
 */
export const defaultPartitioner = Partitioners.DefaultPartitioner;

/**
 * Every producer of the bridge is made here. Idempotent (which makes kafkajs force acks=-1) with
 * one request in flight, so a retried batch can neither be duplicated nor overtaken by the next;
 * the Java client's murmur2 partitioner, so a key lands on the partition any other client picks
 * (shared/plumbing/kafka/murmur2.ts); topics are never auto-created (shared/plumbing/kafka/topics.ts).
 */
export function createIdempotentProducer(kafka: Kafka, options: IdempotentProducerOptions = {}): Producer {
  return kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    createPartitioner: defaultPartitioner,
    ...(options.transactionalId !== undefined
      ? {
          transactionalId: options.transactionalId,
          transactionTimeout: options.transactionTimeoutMs ?? 60_000,
          // A transaction begun while the coordinator still writes the previous commit's markers
          // gets CONCURRENT_TRANSACTIONS on AddPartitionsToTxn, and kafkajs retries the whole send
          // after the client's general backoff, which stalled back-to-back relay passes. The Java
          // client retries that case after a short fixed delay; so does this one
          // (test/relay/back-to-back-transactions.test.ts).
          // Retries stay unbounded, as kafkajs has them for an idempotent producer.
          retry: { initialRetryTime: TRANSACTION_RETRY_INITIAL_MS, retries: Number.MAX_SAFE_INTEGER },
        }
      : {}),
  });
}

/** An idempotent producer that is replaced after every failed or timed-out use (see RecoveringProducer). */
export function createRecoveringProducer(
  kafka: Kafka,
  settings: { name: string; logger: Logger; connectTimeoutMs: number } & IdempotentProducerOptions,
): RecoveringProducer {
  const { name, logger, connectTimeoutMs, ...options } = settings;
  return new RecoveringProducer({ name, logger, connectTimeoutMs, create: () => createIdempotentProducer(kafka, options) });
}
