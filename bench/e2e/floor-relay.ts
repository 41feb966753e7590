// The middle hop of bench:e2e's floor, in a process of its own as the worker is: a consumer-group
// member that re-produces every fetched record in a Kafka transaction, with the relay's producer
// (createRelayProducer: transactional lanes, fenced before the first send) and the worker's consumer
// settings, and none of the bridge's work between them. One transaction per fetch: the partition
// batches of a fetch (handled concurrently, as the worker does) are coalesced into one.
// Driven over IPC by bench/e2e/floor.ts: {start: {input, output, group}} subscribes a fresh group and
// answers {ready}; {stop} leaves the group and answers {stopped}; {exit} ends the process.
import type { Consumer, Message } from '#plumbing/kafka/types.ts';
import { createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { PartitionedSender, topicLayouts } from '#plumbing/kafka/partitioned-send.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { workerEnvSchema } from '#services/worker/config.ts';
import { createRelayProducer } from '#services/worker/relay/parts.ts';
import { SerialBatcher } from './serial-batcher.ts';

export type FloorRelayCommand = { start: { input: string; output: string; group: string } } | { stop: true } | { exit: true };
export type FloorRelayReply = { ready: string } | { stopped: string } | { failed: string };

// The worker's own defaults (services/worker/config.ts), so the floor's member fetches as the worker's does.
const shape = workerEnvSchema.shape;
const sessionTimeoutMs = shape.WORKER_SESSION_TIMEOUT_MS.parse(undefined);
const maxBytesPerPartition = shape.WORKER_MAX_BYTES_PER_PARTITION.parse(undefined);
const partitionsConcurrency = shape.WORKER_PARTITIONS_CONCURRENCY.parse(undefined);
const sendTimeoutMs = shape.RELAY_SEND_TIMEOUT_MS.parse(undefined);

const send = (reply: FloorRelayReply) => process.send!(reply);
const logger = createLogger({ name: 'bench-floor-relay', level: process.env.LOG_LEVEL ?? 'warn' });
const kafka = createKafka({ brokers: parseBrokers(process.env.KAFKA_BROKERS!), clientId: 'bench-floor-relay', logger });
const admin = kafka.admin();
await admin.connect();
const producer = createRelayProducer(kafka, process.env.FLOOR_TRANSACTIONAL_ID!, logger, sendTimeoutMs);
await producer.connect();
await producer.fence(sendTimeoutMs, 'relay_send_timeout', 'floor relay start');
const sender = new PartitionedSender({ send: () => Promise.reject(new Error('send through a transaction')) }, topicLayouts(admin));

let consumer: Consumer | undefined;
let group = '';

async function start(input: string, output: string, groupId: string): Promise<void> {
  const transactions = new SerialBatcher<Message>((messages) =>
    producer.use(
      async (p) => {
        const transaction = await p.transaction();
        await sender.send({ topic: output, acks: -1, messages }, transaction);
        await transaction.commit();
      },
      sendTimeoutMs,
      'relay_send_timeout',
      'floor re-produce',
    ),
  );
  const member = kafka.consumer({
    groupId,
    sessionTimeout: sessionTimeoutMs,
    heartbeatInterval: Math.max(1000, Math.floor(sessionTimeoutMs / 10)),
    maxBytesPerPartition,
    maxWaitTimeInMs: 500,
  });
  await member.connect();
  await member.subscribe({ topics: [input], fromBeginning: true });
  const joined = new Promise<void>((resolve) => member.on(member.events.GROUP_JOIN, () => resolve()));
  await member.run({
    // Offsets are committed after each batch's transaction, as kafkajs does by default.
    partitionsConsumedConcurrently: partitionsConcurrency,
    eachBatch: async ({ batch }) => {
      await transactions.add(batch.messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers ?? {} })));
    },
  });
  await joined;
  consumer = member;
  group = groupId;
}

process.on('message', (command: FloorRelayCommand) => {
  void (async () => {
    try {
      if ('start' in command) {
        await start(command.start.input, command.start.output, command.start.group);
        send({ ready: group });
      } else if ('stop' in command) {
        await consumer?.disconnect();
        consumer = undefined;
        send({ stopped: group });
      } else {
        await consumer?.disconnect();
        await producer.close();
        await admin.disconnect();
        process.exit(0);
      }
    } catch (error) {
      send({ failed: (error as Error).stack ?? String(error) });
    }
  })();
});
send({ ready: '' });
