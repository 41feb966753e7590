import { z } from 'zod';
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import type pg from 'pg';
import { databaseEnv, kafkaEnv, parseConfig, topicEnv, topicSettingsFrom } from '#plumbing/config/env.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { topicNames, type TopicNames, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { createPool } from '#plumbing/db/pool.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { Output } from './output.ts';

const groupEnv = z.object({ CONSUMER_GROUP: z.string().min(1).default(DEFAULTS.consumerGroup) });

export type Env = Record<string, string | undefined>;

/**
 * What a command may use. Config is parsed per piece on first use, so `send` never asks for
 * DATABASE_URL and `--help` needs no config at all; clients are closed by the dispatcher.
 */
export class CliContext {
  readonly env: Env;
  readonly out: Output;
  readonly logger: Logger;
  private readonly closers: Array<() => Promise<void>> = [];
  private kafkaClient: Kafka | undefined;
  private poolClient: pg.Pool | undefined;

  constructor(env: Env, out: Output, logger: Logger) {
    this.env = env;
    this.out = out;
    this.logger = logger;
  }

  topicSettings(): TopicSettings {
    return topicSettingsFrom(parseConfig(topicEnv, this.env));
  }

  topicNames(): TopicNames {
    return topicNames(this.topicSettings());
  }

  consumerGroup(): string {
    return parseConfig(groupEnv, this.env).CONSUMER_GROUP;
  }

  kafka(): Kafka {
    if (!this.kafkaClient) {
      const config = parseConfig(kafkaEnv, this.env);
      this.kafkaClient = createKafka({
        brokers: config.KAFKA_BROKERS,
        clientId: config.KAFKA_CLIENT_ID ?? 'bridge-cli',
        logger: this.logger,
        // An operator waits at a prompt: fail fast with a clear message instead of retrying for a minute.
        connectionTimeoutMs: 3000,
        retries: 2,
      });
    }
    return this.kafkaClient;
  }

  databaseUrl(): string {
    return parseConfig(databaseEnv, this.env).DATABASE_URL;
  }

  pool(): pg.Pool {
    if (!this.poolClient) {
      const config = parseConfig(databaseEnv, this.env);
      const pool = createPool({
        url: config.DATABASE_URL,
        max: 4,
        statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
        idleInTransactionTimeoutMs: config.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
        applicationName: 'bridge-cli',
      });
      this.poolClient = pool;
      this.onClose(() => pool.end());
    }
    return this.poolClient;
  }

  /** Registers cleanup run after the command, newest first, even when it failed. */
  onClose(fn: () => Promise<void>): void {
    this.closers.push(fn);
  }

  async close(): Promise<void> {
    for (const fn of this.closers.reverse()) {
      await fn().catch((error: unknown) => this.logger.warn({ err: error }, 'cleanup failed'));
    }
    this.closers.length = 0;
  }
}

const admins = new WeakMap<CliContext, Promise<Admin>>();

/** The command's one admin client, connected on first use and disconnected by the dispatcher. */
export function connectedAdmin(ctx: CliContext): Promise<Admin> {
  let admin = admins.get(ctx);
  if (!admin) {
    const client = ctx.kafka().admin();
    admin = client.connect().then(() => {
      ctx.onClose(() => client.disconnect());
      return client;
    });
    admins.set(ctx, admin);
  }
  return admin;
}
