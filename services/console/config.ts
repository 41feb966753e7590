import { z } from 'zod';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { databaseEnv, kafkaEnv, logEnv, parseConfig, portSchema, topicEnv, topicSettingsFrom } from '#plumbing/config/env.ts';
import { topicNames, type TopicNames } from '#plumbing/kafka/topics.ts';

const consoleEnv = z
  .object({
    CONSOLE_PORT: portSchema.default(DEFAULTS.consolePort),
    /** Loopback unless configured: the console shows event bodies and can replay. */
    CONSOLE_HOST: z.string().min(1).default('127.0.0.1'),
    /** Unset: the console only reads; every action is disabled. */
    CONSOLE_OPERATOR_TOKEN: z.string().min(16, 'CONSOLE_OPERATOR_TOKEN must be at least 16 characters').optional(),
    CONSUMER_GROUP: z.string().min(1).default(DEFAULTS.consumerGroup),
    /** The ingress's metrics, for answers by status code; default its admin port on this host. */
    INGRESS_METRICS_URL: z.url().optional(),
    INGRESS_ADMIN_PORT: portSchema.default(DEFAULTS.adminPort.ingress),
    /** The sources file (as the worker's and the CLI's): the resource page's Reconcile uses its `reconcile` settings. */
    WEBHOOK_SOURCES_FILE: z.string().min(1).optional(),
  })
  .and(kafkaEnv)
  .and(databaseEnv)
  .and(topicEnv)
  .and(logEnv);

export interface ConsoleConfig {
  port: number;
  host: string;
  operatorToken: string | undefined;
  brokers: string[];
  databaseUrl: string;
  statementTimeoutMs: number;
  names: TopicNames;
  group: string;
  ingressMetricsUrl: string;
  logLevel: string;
  /** LOG_BUFFER_BYTES (stdoutDestination). */
  logBufferBytes?: number;
  /** WEBHOOK_SOURCES_FILE; unset: no Reconcile on the resource page (it says why). */
  sourcesFile?: string | undefined;
}

export function consoleConfigFrom(env: Record<string, string | undefined>): ConsoleConfig {
  const c = parseConfig(consoleEnv, env);
  return {
    port: c.CONSOLE_PORT,
    host: c.CONSOLE_HOST,
    operatorToken: c.CONSOLE_OPERATOR_TOKEN,
    brokers: c.KAFKA_BROKERS,
    databaseUrl: c.DATABASE_URL,
    statementTimeoutMs: c.DATABASE_STATEMENT_TIMEOUT_MS,
    names: topicNames(topicSettingsFrom(c)),
    group: c.CONSUMER_GROUP,
    ingressMetricsUrl: c.INGRESS_METRICS_URL ?? `http://127.0.0.1:${c.INGRESS_ADMIN_PORT}/metrics`,
    logLevel: c.LOG_LEVEL,
    logBufferBytes: c.LOG_BUFFER_BYTES,
    sourcesFile: c.WEBHOOK_SOURCES_FILE,
  };
}
