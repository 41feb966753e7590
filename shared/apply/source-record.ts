import type { KafkaMessage } from 'kafkajs';
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
