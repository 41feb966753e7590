import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kafka, Producer } from '#plumbing/kafka/types.ts';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createIdempotentProducer } from '#plumbing/kafka/producers.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import { createRelayProducer, RELAY_TRANSACTION_LANES } from '#services/worker/relay/index.ts';
import { testBrokers, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';

const PARTITIONS = 6;

interface RetryLine {
  msg: string;
  retryTime?: number;
  retryCount?: number;
}

/**
 * Regression (issue 12's latency): when a transaction starts right after the previous one
 * committed, the coordinator may still be writing the previous commit markers and answers
 * AddPartitionsToTxn with CONCURRENT_TRANSACTIONS. kafkajs then retried the whole send after the
 * client's general backoff, so the relay stalled a few times a minute and that stall was the
 * end-to-end p99. The Java client retries this case after a short fixed delay; so must the relay's
 * transactional producer.
 */
describe('back-to-back transactions on the relay producer', () => {
  const lines: RetryLine[] = [];
  let producer: Producer;
  let topic: string;
  let kafka: Kafka;
  let logger: Logger;
  const retries = (from = 0) => lines.slice(from).filter((l) => l.msg.startsWith('Failed to send messages') && l.retryTime !== undefined);

  beforeAll(async () => {
    topic = uniqueName('txn-race');
    const admin = testKafka().admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true });
    await admin.disconnect();
    logger = createLogger({ name: 'relay', level: 'error' }, { write: (line: string) => lines.push(JSON.parse(line) as RetryLine) });
    kafka = createKafka({ brokers: testBrokers(), clientId: uniqueName('relay'), logger });
    producer = createIdempotentProducer(kafka, { transactionalId: uniqueName('txn-race') });
    await producer.connect();
  });
  afterAll(async () => {
    await producer?.disconnect();
  });

  it('retries a transaction that meets the previous commit still in progress within tens of ms, not after 100', async () => {
    const deadline = Date.now() + 40_000;
    let transactions = 0;
    // Back to back, every partition in each: the window after EndTxn is a few ms, so the race
    // shows within a few hundred transactions here.
    while (retries().length < 3 && Date.now() < deadline && transactions < 5_000) {
      const transaction = await producer.transaction();
      await transaction.send({
        topic,
        acks: -1,
        messages: Array.from({ length: PARTITIONS }, (_, partition) => ({ partition, key: `k${partition}`, value: String(transactions) })),
      });
      await transaction.commit();
      transactions += 1;
    }
    const seen = retries();
    expect(seen.length, `no CONCURRENT_TRANSACTIONS retry in ${transactions} back-to-back transactions`).toBeGreaterThan(0);
    // The first retry of each send (kafkajs's backoff grows by 2x, ±20%, on later ones).
    for (const line of seen.filter((l) => l.retryCount === 0)) expect(line.retryTime, JSON.stringify(line)).toBeLessThanOrEqual(30);
  }, 60_000);

  it('looks the transaction coordinator up once, not before every AddPartitionsToTxn and EndTxn (patches/kafkajs)', async () => {
    const requests: string[] = [];
    const off = producer.on(producer.events.REQUEST, (e) => requests.push(e.payload.apiName));
    try {
      for (let i = 0; i < 50; i += 1) {
        const transaction = await producer.transaction();
        await transaction.send({ topic, acks: -1, messages: [{ partition: i % PARTITIONS, key: `k${i}`, value: String(i) }] });
        await transaction.commit();
      }
    } finally {
      off();
    }
    const count = (api: string) => requests.filter((r) => r === api).length;
    expect(count('EndTxn')).toBe(50);
    // kafkajs calls FindCoordinator "GroupCoordinator"; unpatched it sent 100 here (2 per transaction).
    expect(count('GroupCoordinator')).toBeLessThanOrEqual(1);
  }, 60_000);

  it('takes its transactional ids in turn, so that a transaction does not wait for the previous commit (TransactionLanes)', async () => {
    // One id meets CONCURRENT_TRANSACTIONS only when its next AddPartitionsToTxn reaches the
    // coordinator before the previous commit's markers are written: a race between this process
    // and the broker, so how often depends on how busy the machine is. The two producers are
    // therefore measured side by side, in alternating blocks of the same size, until one id has
    // met enough retries to compare against; the load then weighs on both alike.
    const BLOCK = 25;
    const ENOUGH = 40;
    const MAX_PER_SIDE = 1_500;
    const one = createRelayProducer(kafka, uniqueName('txn-one'), logger, 10_000, 1);
    const lanes = createRelayProducer(kafka, uniqueName('txn-lanes'), logger, 10_000, RELAY_TRANSACTION_LANES);
    const counts = { one: { transactions: 0, retries: 0 }, lanes: { transactions: 0, retries: 0 } };
    const block = async (side: 'one' | 'lanes') => {
      const relay = side === 'one' ? one : lanes;
      const from = lines.length;
      for (let i = 0; i < BLOCK; i += 1) {
        const n = counts[side].transactions++;
        await relay.use(
          async (p) => {
            const transaction = await p.transaction();
            await transaction.send({ topic, acks: -1, messages: [{ partition: n % PARTITIONS, key: `${side}-${n}`, value: String(n) }] });
            await transaction.commit();
          },
          10_000,
          'relay_send_timeout',
          'back-to-back',
        );
      }
      counts[side].retries += retries(from).length;
    };
    await Promise.all([one.connect(), lanes.connect()]);
    try {
      // Initialising the ids (fence) is not part of the measure.
      await Promise.all([
        one.fence(10_000, 'relay_send_timeout', 'back-to-back'),
        lanes.fence(10_000, 'relay_send_timeout', 'back-to-back'),
      ]);
      const deadline = Date.now() + 60_000;
      for (let round = 0; counts.one.retries < ENOUGH && counts.one.transactions < MAX_PER_SIDE && Date.now() < deadline; round += 1) {
        for (const side of round % 2 === 0 ? (['one', 'lanes'] as const) : (['lanes', 'one'] as const)) await block(side);
      }
    } finally {
      await Promise.all([one.close(), lanes.close()]);
    }
    console.log(`back-to-back transactions, CONCURRENT_TRANSACTIONS retries: ${JSON.stringify(counts)}`);
    const { one: single, lanes: turns } = counts;
    // Too few retries on one id and the comparison says nothing (the race did not show here).
    expect(single.retries, `one transactional id: ${single.retries} retries in ${single.transactions} transactions`).toBeGreaterThanOrEqual(
      ENOUGH / 2,
    );
    expect(turns.transactions).toBe(single.transactions);
    expect(
      turns.retries,
      `${RELAY_TRANSACTION_LANES} lanes: ${turns.retries} retries, one id: ${single.retries}, in ${single.transactions} transactions each`,
    ).toBeLessThan(single.retries / 4);
  }, 120_000);
});
