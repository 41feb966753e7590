import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../kit/db.ts';
import { testBrokers, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { createTopicsRetrying } from './helpers.ts';
import { sleep } from '../kit/eventually.ts';

// A start on a fresh clone printed kafkajs responses (coordinator loading, not available) at error
// level while nothing was wrong: a start that succeeds writes no error line.
describe('a worker starting normally', () => {
  let db: TestDatabase | undefined;
  let worker: ServiceProcess | undefined;
  afterAll(async () => {
    await worker?.stop();
    await db?.drop();
  });

  it('joins its group and relays without a line at error level', async () => {
    db = await createTestDatabase();
    const { names } = await createTopicsRetrying(testKafka());
    worker = spawnService('worker', {
      KAFKA_BROKERS: testBrokers().join(','),
      DATABASE_URL: db.url,
      TOPIC_EVENTS: names.events,
      TOPIC_APPLIED: names.applied,
      TOPIC_RETRY_LEVELS: String(names.retries.length),
      // A new group: the broker finds (and may first load) its coordinator now.
      CONSUMER_GROUP: uniqueName('theme-applier'),
      ADMIN_PORT: '0',
      LOG_LEVEL: 'info',
    });
    await worker.line('joined consumer group');
    // Whatever a start logs late (the relay, the retry consumers) is written within the flush interval.
    await sleep(2000);
    const lines = worker
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: string; msg: string });
    expect(lines.filter((l) => l.level === 'error' || l.level === 'fatal')).toEqual([]);
  });
});
