// The outbox relay in tests, on its own: the test drives it pass by pass (useTestRelay for a suite's).
import type { Logger } from '#plumbing/logging/logger.ts';
import { noCrashPoints } from '#services/worker/crash-points.ts';
import { OutboxRelay, relayParts } from '#services/worker/relay/index.ts';
import type { TopicSettings } from '#plumbing/kafka/topics.ts';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { useTestDatabase, type TestDatabase } from './db.ts';
import { suiteFixture } from './fixture.ts';
import { testBrokers, testKafka, useTestTopics } from './kafka.ts';
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

export interface TestRelay {
  db: TestDatabase;
  /** A client on the test broker. */
  kafka: Kafka;
  /** The topic it publishes to. */
  applied: string;
  /** The relay (from the beforeAll on), stopped after the suite. */
  relay: OutboxRelay;
}

/** A relay for the suite on a database and a topic set of its own, each made before its first test. */
export function useTestRelay(options: { topics?: Partial<TopicSettings>; logger: Logger; batchSize: number }): TestRelay {
  const db = useTestDatabase();
  const kafka = testKafka();
  const { names } = useTestTopics(kafka, options.topics);
  const relay = suiteFixture(
    async () => createTestRelay({ db, applied: names.applied, logger: options.logger, batchSize: options.batchSize }),
    (made) => made.stop(),
  );
  return { db, kafka, applied: names.applied, relay };
}
