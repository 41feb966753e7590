import type { Kafka } from '#plumbing/kafka/types.ts';
import { createRecoveringProducer } from '#plumbing/kafka/producers.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { EventsRecord } from './reconciler.ts';

export interface EventsPublisher {
  publish: (record: EventsRecord) => Promise<void>;
  close: () => Promise<void>;
}

/** Publishes pulled snapshots to the events topic with the bridge's idempotent producer (acks=all). */
export function createEventsPublisher(kafka: Kafka, options: { topic: string; logger: Logger; timeoutMs?: number }): EventsPublisher {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const producer = createRecoveringProducer(kafka, { name: 'reconcile', logger: options.logger, connectTimeoutMs: timeoutMs });
  return {
    publish: async (record) => {
      await producer.use(
        (p) => p.send({ topic: options.topic, acks: -1, messages: [{ key: record.key, value: record.value, headers: record.headers }] }),
        timeoutMs,
        'reconcile_publish_timeout',
        'publishing a reconciled snapshot',
      );
    },
    close: () => producer.close(),
  };
}
