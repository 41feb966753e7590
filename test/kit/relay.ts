// The outbox relay in tests, on its own: the test drives it pass by pass.
import type { Logger } from '#plumbing/logging/logger.ts';
import { noCrashPoints } from '#services/worker/crash-points.ts';
import { OutboxRelay, relayParts } from '#services/worker/relay/index.ts';
import type { TestDatabase } from './db.ts';
import { testBrokers, testKafka } from './kafka.ts';
import { uniqueName } from './names.ts';

/** A relay on the test database and broker, publishing to `applied`; the test drives publishOnce(). */
export function createTestRelay(options: { db: TestDatabase; applied: string; logger: Logger; batchSize: number }): OutboxRelay {
  const { db, applied, logger, batchSize } = options;
  return new OutboxRelay({
    pool: db.pool,
    ...relayParts({
      kafka: testKafka(uniqueName('relay'), testBrokers()),
      databaseUrl: db.url,
      transactionalId: `${applied}.relay`,
      logger,
      sendTimeoutMs: 10_000,
    }),
    topic: applied,
    batchSize,
    pollMs: 50,
    sendTimeoutMs: 10_000,
    logger,
    crashPoints: noCrashPoints,
  });
}
