import { z } from 'zod';
import { parseBrokers } from '#plumbing/kafka/client.ts';
import { defaultTopicSettings, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { DEFAULTS } from './defaults.ts';
import { DEFAULT_LOG_BUFFER_BYTES, MAX_LOG_BUFFER_BYTES } from '#plumbing/logging/logger.ts';

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Parses once at start-up and reports every problem, not just the first. */
export function parseConfig<S extends z.ZodType>(schema: S, env: Record<string, string | undefined> = process.env): z.infer<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  throw new ConfigError(result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`));
}

/** For main.ts: print the problems and exit 1 instead of a stack trace. */
export function loadConfigOrExit<S extends z.ZodType>(schema: S, env: Record<string, string | undefined> = process.env): z.infer<S> {
  try {
    return parseConfig(schema, env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
}

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();

export const kafkaEnv = z.object({
  KAFKA_BROKERS: z.string({ error: 'KAFKA_BROKERS is required (comma-separated host:port list)' }).min(1).transform(parseBrokers),
  KAFKA_CLIENT_ID: z.string().min(1).optional(),
});

export const databaseEnv = z.object({
  DATABASE_URL: z.string({ error: 'DATABASE_URL is required' }).url(),
  DATABASE_POOL_SIZE: positiveInt.default(DEFAULTS.database.poolSize),
  DATABASE_STATEMENT_TIMEOUT_MS: positiveInt.default(DEFAULTS.database.statementTimeoutMs),
  DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: positiveInt.default(DEFAULTS.database.idleInTransactionTimeoutMs),
});

export const topicEnv = z.object({
  TOPIC_EVENTS: z.string().min(1).default(defaultTopicSettings.events),
  TOPIC_APPLIED: z.string().min(1).default(defaultTopicSettings.applied),
  TOPIC_EVENTS_PARTITIONS: positiveInt.default(defaultTopicSettings.eventsPartitions),
  TOPIC_RETRY_LEVELS: z.coerce.number().int().min(0).max(10).default(defaultTopicSettings.retryLevels),
  TOPIC_REPLICATION_FACTOR: positiveInt.default(defaultTopicSettings.replicationFactor),
  TOPIC_MIN_INSYNC_REPLICAS: positiveInt.default(defaultTopicSettings.minInsyncReplicas),
});

export function topicSettingsFrom(env: z.infer<typeof topicEnv>): TopicSettings {
  return {
    events: env.TOPIC_EVENTS,
    applied: env.TOPIC_APPLIED,
    eventsPartitions: env.TOPIC_EVENTS_PARTITIONS,
    retryLevels: env.TOPIC_RETRY_LEVELS,
    replicationFactor: env.TOPIC_REPLICATION_FACTOR,
    minInsyncReplicas: env.TOPIC_MIN_INSYNC_REPLICAS,
  };
}

export const logEnv = z.object({
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Log bytes held before a write to stdout (also flushed every 100 ms and at exit); 0: no holding back. */
  LOG_BUFFER_BYTES: z.coerce.number().int().min(0).max(MAX_LOG_BUFFER_BYTES).default(DEFAULT_LOG_BUFFER_BYTES),
});

export { port as portSchema, positiveInt as positiveIntSchema };
