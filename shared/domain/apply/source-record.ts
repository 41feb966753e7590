import type { KafkaMessage } from '#plumbing/kafka/types.ts';
import { deliveryAttemptHeader } from '#domain/contract/event-headers.ts';
import type { ReceivedEnvelope } from '#domain/contract/index.ts';
import type { SourceRecord } from './types.ts';

/** A consumed Kafka message as the apply path sees it (the raw body untouched). */
export function toSourceRecord(topic: string, partition: number, message: KafkaMessage): SourceRecord {
  return {
    topic,
    partition,
    offset: message.offset,
    key: message.key,
    value: message.value,
    timestamp: message.timestamp,
    headers: message.headers ?? {},
  };
}

/** The provider's attempt number: X-Webhook-Retry as the ingress passed it on, else the body's delivery_attempt. */
export function deliveryAttemptOf(record: SourceRecord, envelope: ReceivedEnvelope): number | undefined {
  return deliveryAttemptHeader(record.headers) ?? envelope.delivery_attempt;
}
