import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { LocalKafka, repoRoot } from '../kit/infra.ts';
import { createTestDatabase, type TestDatabase } from '../kit/db.ts';
import { createTestTopics, testBrokers, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { freePortRange } from '../kit/ports.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { workerEnv } from '../kit/worker.ts';

interface LogLine {
  level: string;
  msg: string;
}

/** The JSON log lines at error or fatal level. */
function errorLines(output: string): LogLine[] {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine)
    .filter((l) => l.level === 'error' || l.level === 'fatal');
}

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
    const { names } = await createTestTopics(testKafka());
    worker = spawnService('worker', {
      // A new group: the broker finds (and may first load) its coordinator now.
      ...workerEnv({ brokers: testBrokers(), databaseUrl: db.url, names, group: uniqueName('theme-applier') }),
      ADMIN_PORT: '0',
      LOG_LEVEL: 'info',
    });
    await worker.line('joined consumer group');
    // Whatever a start logs late (the relay, the retry consumers) is written within the flush interval.
    await sleep(2000);
    expect(errorLines(worker.stdout())).toEqual([]);
  });
});

// The fresh clone's case: a broker that has never had a consumer group creates and loads its
// offsets topic as the worker's consumers first join; a join refused while a partition loads made
// kafkajs crash and restart the consumer, in error lines. `npm run worker` (infra/dev/service.ts),
// as `npm start`, waits for the groups' coordinators before it starts the worker.
describe('npm run worker on a broker that has never had a consumer group', () => {
  let cluster: LocalKafka | undefined;
  let db: TestDatabase | undefined;
  let run: ChildProcess | undefined;
  beforeAll(async () => {
    cluster = new LocalKafka({ name: `quiet-start-${process.pid}`, nodes: 1, basePort: await freePortRange(2) });
    cluster.wipe();
    await cluster.start();
  });
  afterAll(async () => {
    if (run && run.exitCode === null && run.signalCode === null) {
      run.kill('SIGTERM');
      await once(run, 'exit');
    }
    await cluster?.stop();
    cluster?.wipe();
    await db?.drop();
  });

  it('starts the worker without a line at error level', async () => {
    db = await createTestDatabase();
    const base = uniqueName('quiet');
    let output = '';
    run = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'infra', 'dev', 'service.ts'), 'worker'], {
      cwd: repoRoot,
      env: {
        ...process.env,
        KAFKA_BROKERS: cluster!.brokers.join(','),
        DATABASE_URL: db.url,
        TOPIC_EVENTS: `${base}.events`,
        TOPIC_APPLIED: `${base}.applied`,
        TOPIC_EVENTS_PARTITIONS: '3',
        CONSUMER_GROUP: `${base}-applier`,
        ADMIN_PORT: '0',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    run.stdout!.on('data', (d) => (output += d));
    run.stderr!.on('data', (d) => (output += d));
    await eventually(() => output.includes('"msg":"joined consumer group"'), { intervalMs: 200, message: 'the worker joining its group' });
    // Whatever a start logs late (the relay, the retry consumers) is written within the flush interval.
    await sleep(2000);
    // kafkajs's crash on a coordinator still loading, its restart and the worker's own line were all errors.
    expect(errorLines(output).map((l) => l.msg)).toEqual([]);
  });
});
