// The relay's factories: the producer, the Postgres pool and the leadership every worker builds
// for its relay the same way (composition.ts, the tests and the benches).
import type { Kafka } from '#plumbing/kafka/types.ts';
import type { Pool } from 'pg';
import { createPool } from '#plumbing/db/pool.ts';
import { RELAY_LEADER_LOCK_KEY } from '#domain/store/outbox.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { createRecoveringProducer } from '#plumbing/kafka/producers.ts';
import { TransactionLanes, type FencedProducerUse } from '#plumbing/kafka/transaction-lanes.ts';
import { RelayLeadership } from './leadership.ts';
import type { OutboxRelayOptions } from './outbox-relay.ts';

/**
 * How many transactional ids the relay takes in turn (TransactionLanes). One id back to back waits
 * for its previous commit's markers before its next transaction can start, which caps its rate;
 * two in turn keep a rate one cannot (bench/results/publish-cost.md, the relay's lanes against one
 * id; test/relay/back-to-back-transactions.test.ts).
 */
export const RELAY_TRANSACTION_LANES = 2;

/**
 * The relay's producer: transactional, with fixed transactional ids shared by every worker of the
 * bridge (`transactionalId`, then `transactionalId.1`, ... for further lanes). A send that timed
 * out cannot be cancelled in kafkajs (it retries for a long while, and a frozen broker may still
 * hold its request in a socket buffer); the replacement producer's InitProducerId bumps the epoch,
 * so the broker refuses the old send if it ever arrives, and aborts its open transaction. Without
 * that, two workers (or one, after a timeout) could land an older batch after a newer one:
 * `K v2, K v1`, and compaction would keep v1. TransactionLanes initialises every id again after
 * any failure, so this holds for each lane.
 */
export function createRelayProducer(
  kafka: Kafka,
  transactionalId: string,
  logger: Logger,
  connectTimeoutMs: number,
  lanes = RELAY_TRANSACTION_LANES,
): FencedProducerUse {
  return new TransactionLanes(
    Array.from({ length: lanes }, (_, lane) =>
      createRecoveringProducer(kafka, {
        name: lane === 0 ? 'outbox-relay' : `outbox-relay-${lane}`,
        logger,
        connectTimeoutMs,
        transactionalId: lane === 0 ? transactionalId : `${transactionalId}.${lane}`,
        transactionTimeoutMs: 60_000,
      }),
    ),
  );
}

export interface RelayPartsSettings {
  kafka: Kafka;
  databaseUrl: string;
  /** The same for every worker of one bridge (one database, one applied topic). */
  transactionalId: string;
  logger: Logger;
  /** Also bounds a new producer's connect. */
  sendTimeoutMs: number;
  /** See RelayLeadership; default 20 s. */
  leaderIdleTimeoutMs?: number;
}

/**
 * The relay's own two Postgres sessions. Its writes are its cursor rows (and a re-baseline after a
 * restore): they commit without waiting for the WAL flush, since losing the newest in a Postgres
 * crash only republishes identical records, which the relay allows for.
 */
export function createRelayPool(settings: {
  url: string;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs?: number | undefined;
  logger: Logger;
}): Pool {
  return createPool({
    url: settings.url,
    max: 2,
    statementTimeoutMs: settings.statementTimeoutMs,
    ...(settings.idleInTransactionTimeoutMs === undefined ? {} : { idleInTransactionTimeoutMs: settings.idleInTransactionTimeoutMs }),
    applicationName: 'worker-relay',
    synchronousCommit: false,
    logger: settings.logger,
  });
}

/** The producer and the leadership a relay needs, as every worker builds them. */
export function relayParts(settings: RelayPartsSettings): Pick<OutboxRelayOptions, 'producer' | 'leadership'> {
  return {
    producer: createRelayProducer(settings.kafka, settings.transactionalId, settings.logger, settings.sendTimeoutMs),
    leadership: new RelayLeadership({
      url: settings.databaseUrl,
      lockKey: RELAY_LEADER_LOCK_KEY,
      idleSessionTimeoutMs: settings.leaderIdleTimeoutMs ?? 20_000,
      retryMs: 1_000,
      logger: settings.logger,
    }),
  };
}
