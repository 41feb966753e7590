import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Transaction } from '#plumbing/kafka/types.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { createRelayProducer } from '#services/worker/relay/index.ts';
import { readTopic, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';

/**
 * The relay takes two transactional ids in turn (TransactionLanes). A relay that starts must fence
 * a former one on every id, not only on the first: otherwise a former leader's transaction left
 * open on the second id could commit after the new leader's records, an older version after a
 * newer one on the compacted applied topic.
 */
describe("relay transaction lanes: a new relay fences a former one's open transaction on every id", () => {
  const kafka = testKafka();
  let topic: string;
  const logger = createLogger({ name: 'relay', level: 'fatal' });

  beforeAll(async () => {
    topic = uniqueName('lanes-fence');
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true });
    await admin.disconnect();
  });
  const relays: ReturnType<typeof createRelayProducer>[] = [];
  afterAll(async () => {
    await Promise.all(relays.map((r) => r.close().catch(() => {})));
  });

  it('refuses the former relay its commit on the second lane once the new relay has started', async () => {
    const transactionalId = uniqueName('lanes-fence');
    const former = createRelayProducer(kafka, transactionalId, logger, 10_000, 2);
    const next = createRelayProducer(kafka, transactionalId, logger, 10_000, 2);
    relays.push(former, next);
    await former.connect();
    const send = (relay: typeof former, value: string, commit = true) =>
      relay.use(
        async (p) => {
          const transaction = await p.transaction();
          await transaction.send({ topic, acks: -1, messages: [{ key: 'theme-1', value }] });
          if (commit) await transaction.commit();
          return transaction;
        },
        10_000,
        'relay_send_timeout',
        'fencing test',
      );
    // The former relay commits v1 on its first lane and leaves v2 open on its second (a pass whose
    // commit is still on its way when another worker takes over).
    await send(former, 'v1');
    const open: Transaction = await send(former, 'v2', false);
    // The new relay publishes v3 on its first lane: before that it has initialised both ids.
    await next.connect();
    await send(next, 'v3');
    await expect(open.commit()).rejects.toThrow(/epoch|fenced/i);

    const values = (await readTopic(kafka, topic)).map((r) => r.value.toString());
    expect(values).toEqual(['v1', 'v3']);
  }, 60_000);
});
