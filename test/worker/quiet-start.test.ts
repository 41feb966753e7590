import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalKafka } from '../kit/infra.ts';
import { createTestDatabase, type TestDatabase } from '../kit/db.ts';
import { createTestTopics, testBrokers, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { freePortRange } from '../kit/ports.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { sleep } from '../kit/eventually.ts';

interface LogLine {
  level: string;
  msg: string;
}

/** Starts a worker on `brokers` and returns its log lines once it has joined and settled. */
async function startQuietly(brokers: string[], topics: { events: string; applied: string; retries: string[] }): Promise<LogLine[]> {
  const worker = spawnService('worker', {
    KAFKA_BROKERS: brokers.join(','),
    DATABASE_URL: db!.url,
    TOPIC_EVENTS: topics.events,
    TOPIC_APPLIED: topics.applied,
    TOPIC_RETRY_LEVELS: String(topics.retries.length),
    // A new group: the broker finds (and may first load) its coordinator now.
    CONSUMER_GROUP: uniqueName('theme-applier'),
    ADMIN_PORT: '0',
    LOG_LEVEL: 'info',
  });
  workers.push(worker);
  await worker.line('joined consumer group');
  // Whatever a start logs late (the relay, the retry consumers) is written within the flush interval.
  await sleep(2000);
  return worker
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

let db: TestDatabase | undefined;
const workers: ServiceProcess[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await db?.drop();
});

// A start on a fresh clone printed kafkajs responses (coordinator loading, not available) at error
// level while nothing was wrong: a start that succeeds writes no error line.
describe('a worker starting normally', () => {
  it('joins its group and relays without a line at error level', async () => {
    db = await createTestDatabase();
    const { names } = await createTestTopics(testKafka());
    const lines = await startQuietly(testBrokers(), names);
    expect(lines.filter((l) => l.level === 'error' || l.level === 'fatal')).toEqual([]);
  });
});

// The fresh clone's case itself: a broker that has never seen a consumer group creates and loads
// its offsets topic while the worker's consumers first join, and kafkajs crashes and restarts them.
describe('a worker starting on a broker that has never had a consumer group', () => {
  let cluster: LocalKafka | undefined;
  beforeAll(async () => {
    cluster = new LocalKafka({ name: `quiet-start-${process.pid}`, nodes: 1, basePort: await freePortRange(2) });
    cluster.wipe();
    await cluster.start();
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await cluster?.stop();
    cluster?.wipe();
  });

  it('joins its groups without a line at error level', async () => {
    db ??= await createTestDatabase();
    const { names } = await createTestTopics(testKafka(uniqueName('quiet'), cluster!.brokers));
    const lines = await startQuietly(cluster!.brokers, names);
    const errors = lines.filter((l) => l.level === 'error' || l.level === 'fatal');
    expect(errors.map((l) => l.msg)).toEqual([]);
  });
});
