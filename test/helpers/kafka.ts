import { inject } from 'vitest';
import type { Kafka } from 'kafkajs';
import { createKafka, parseBrokers } from '../../shared/kafka/client.ts';
import { createLogger } from '../../shared/logging/logger.ts';
import { ensureTopics, topicNames, topicSpecs, type TopicNames, type TopicSettings } from '../../shared/kafka/topics.ts';
import { uniqueName } from './names.ts';

export function testBrokers(): string[] {
  return parseBrokers(inject('kafkaBrokers'));
}

export function testKafka(clientId = uniqueName('test'), brokers = testBrokers()): Kafka {
  return createKafka({ brokers, clientId, logger: createLogger({ name: 'test', level: process.env.TEST_LOG_LEVEL ?? 'error' }) });
}

/** A full, uniquely named topic set (events, retries, dlq, applied) created on the test broker. */
export async function createTestTopics(
  kafka: Kafka,
  overrides: Partial<TopicSettings> = {},
): Promise<{ settings: TopicSettings; names: TopicNames }> {
  const base = uniqueName('t');
  const settings: TopicSettings = {
    events: `${base}.events`,
    applied: `${base}.applied`,
    eventsPartitions: 3,
    retryLevels: 4,
    replicationFactor: 1,
    minInsyncReplicas: 1,
    ...overrides,
  };
  const admin = kafka.admin();
  await admin.connect();
  try {
    await ensureTopics(admin, topicSpecs(settings), settings.replicationFactor);
  } finally {
    await admin.disconnect();
  }
  return { settings, names: topicNames(settings) };
}
