import type { KafkaMessage } from 'kafkajs';
import { EVENT_HEADERS, type EventEnvelope } from '#domain/contract/index.ts';
import type { RecordHeaderValue, SourceRecord } from './types.ts';

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

/** A header's first value as text (kafkajs gives Buffers, or arrays for repeated headers). */
export function headerString(value: RecordHeaderValue): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined ? undefined : first.toString();
}

/** The provider's attempt number: X-Webhook-Retry as the ingress passed it on, else the body's delivery_attempt. */
export function deliveryAttemptOf(record: SourceRecord, envelope: EventEnvelope): number | undefined {
  const header = headerString(record.headers?.[EVENT_HEADERS.deliveryAttempt]);
  if (header !== undefined && /^\d{1,9}$/.test(header)) return Number(header);
  return envelope.delivery_attempt;
}
