// The two Kafka clients behind one small surface, each set up as the bridge sets kafkajs up:
// idempotent with acks=all and the Java client's murmur2 partitioner, TCP_NODELAY, topics never
// auto-created; a group member fetching up to 1 MiB per partition with a 500 ms wait; the
// relay's transactional producers, one transactional id per lane, fenced before the first send.
import {
  compatibilityPartitioner,
  Consumer as PlatformaticConsumer,
  Producer as PlatformaticProducer,
  ProduceAcks,
  stringSerializer,
  type Message as PlatformaticMessage,
} from '@platformatic/kafka';
import { createKafka } from '#plumbing/kafka/client.ts';
import { createIdempotentProducer } from '#plumbing/kafka/producers.ts';
import { initialiseTransactions } from '#plumbing/kafka/transaction-lanes.ts';
import type { KafkaMessage } from '#plumbing/kafka/types.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import type { CoalescedRecord } from './coalescer.ts';

export const CLIENTS = ['kafkajs', 'platformatic'] as const;
export type ClientName = (typeof CLIENTS)[number];

export interface Sender {
  send(records: CoalescedRecord[]): Promise<void>;
  close(): Promise<void>;
}

/** What the bench reads of every record: the work a consumer of the events topic cannot skip. */
export interface DecodedRecord {
  partition: number;
  key: string;
  value: string;
  headers: Record<string, string>;
}

export interface ReadSettings {
  topic: string;
  groupId: string;
  /** Records to read before it stops: the sum of the end offsets. */
  total: number;
  maxBytesPerPartition: number;
  onRecord: (record: DecodedRecord) => void;
}

export interface ReadTimes {
  /** performance.now() of the first and the last record. */
  firstAt: number;
  lastAt: number;
}

export interface ClientUnderTest {
  idempotentSender(topic: string): Promise<Sender>;
  /** Transactional producers taken in turn, one transaction at a time (the relay's lanes). */
  transactionLanes(topic: string, transactionalIds: string[]): Promise<Sender>;
  readAll(settings: ReadSettings): Promise<ReadTimes>;
}

const MAX_WAIT_MS = 500;
const MAX_BYTES = 10 * 1024 * 1024;

export function clientFor(name: ClientName, brokers: string[]): ClientUnderTest {
  return name === 'kafkajs' ? kafkajsClient(brokers) : platformaticClient(brokers);
}

function headerText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

function kafkajsClient(brokers: string[]): ClientUnderTest {
  const logger = createLogger({ name: 'bench-kafka-clients', level: 'warn' });
  const kafka = createKafka({ brokers, clientId: 'bench-kafka-clients', logger });
  const messages = (records: CoalescedRecord[]) => records.map((r) => ({ key: r.key, value: r.value, headers: r.headers }));
  return {
    async idempotentSender(topic) {
      const producer = createIdempotentProducer(kafka);
      await producer.connect();
      return {
        send: async (records) => {
          await producer.send({ topic, acks: -1, messages: messages(records) });
        },
        close: () => producer.disconnect(),
      };
    },
    async transactionLanes(topic, transactionalIds) {
      const lanes = transactionalIds.map((transactionalId) =>
        createIdempotentProducer(kafka, { transactionalId, transactionTimeoutMs: 60_000 }),
      );
      await Promise.all(lanes.map((p) => p.connect()));
      await Promise.all(lanes.map((p) => initialiseTransactions(p)));
      let next = 0;
      return {
        send: async (records) => {
          const lane = lanes[next]!;
          const transaction = await lane.transaction();
          try {
            await transaction.send({ topic, acks: -1, messages: messages(records) });
          } catch (error) {
            await transaction.abort().catch(() => {});
            throw error;
          }
          await transaction.commit();
          next = (next + 1) % lanes.length;
        },
        close: async () => {
          await Promise.all(lanes.map((p) => p.disconnect()));
        },
      };
    },
    async readAll({ topic, groupId, total, maxBytesPerPartition, onRecord }) {
      const consumer = kafka.consumer({ groupId, maxBytesPerPartition, maxBytes: MAX_BYTES, maxWaitTimeInMs: MAX_WAIT_MS });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const times = { firstAt: NaN, lastAt: NaN };
      let count = 0;
      const done = new Promise<void>((resolve) => {
        const decode = (partition: number, m: KafkaMessage) => {
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(m.headers ?? {})) headers[name] = headerText(value);
          onRecord({ partition, key: m.key?.toString('utf8') ?? '', value: m.value?.toString('utf8') ?? '', headers });
        };
        void consumer.run({
          autoCommit: false,
          // As the worker reads: every partition of a fetch handed over at once.
          partitionsConsumedConcurrently: 12,
          eachBatch: async ({ batch }) => {
            if (Number.isNaN(times.firstAt)) times.firstAt = performance.now();
            for (const m of batch.messages) decode(batch.partition, m);
            count += batch.messages.length;
            if (count >= total) {
              times.lastAt = performance.now();
              resolve();
            }
          },
        });
      });
      await done;
      await consumer.disconnect();
      return times;
    },
  };
}

function platformaticClient(brokers: string[]): ClientUnderTest {
  const base = { clientId: 'bench-kafka-clients', bootstrapBrokers: brokers, connectTimeout: 3000, requestTimeout: 10_000 };
  const serializers = { key: stringSerializer, headerKey: stringSerializer, headerValue: stringSerializer };
  const producerOptions = {
    ...base,
    idempotent: true,
    acks: ProduceAcks.ALL,
    partitioner: compatibilityPartitioner,
    autocreateTopics: false,
    serializers,
  };
  const messages = (topic: string, records: CoalescedRecord[]) =>
    records.map((r) => ({ topic, key: r.key, value: r.value, headers: r.headers }));
  return {
    async idempotentSender(topic) {
      const producer = new PlatformaticProducer<string, Buffer, string, string>(producerOptions);
      await producer.initIdempotentProducer({});
      return {
        send: async (records) => {
          await producer.send({ messages: messages(topic, records) });
        },
        close: () => producer.close(),
      };
    },
    async transactionLanes(topic, transactionalIds) {
      const lanes = transactionalIds.map(
        (transactionalId) => new PlatformaticProducer<string, Buffer, string, string>({ ...producerOptions, transactionalId }),
      );
      // Beginning a transaction initialises the id (InitProducerId), which fences a former holder.
      for (const lane of lanes) await (await lane.beginTransaction()).cancel();
      let next = 0;
      return {
        send: async (records) => {
          const transaction = await lanes[next]!.beginTransaction();
          try {
            await transaction.send({ messages: messages(topic, records) });
          } catch (error) {
            await transaction.abort().catch(() => {});
            throw error;
          }
          await transaction.commit();
          next = (next + 1) % lanes.length;
        },
        close: async () => {
          await Promise.all(lanes.map((p) => p.close()));
        },
      };
    },
    async readAll({ topic, groupId, total, maxBytesPerPartition, onRecord }) {
      const consumer = new PlatformaticConsumer({ ...base, groupId, maxBytesPerPartition, maxBytes: MAX_BYTES, maxWaitTime: MAX_WAIT_MS });
      const stream = await consumer.consume({ topics: [topic], mode: 'earliest', autocommit: false });
      const times = { firstAt: NaN, lastAt: NaN };
      let count = 0;
      await new Promise<void>((resolve, reject) => {
        stream.on('error', reject);
        stream.on('data', (m: PlatformaticMessage) => {
          if (Number.isNaN(times.firstAt)) times.firstAt = performance.now();
          const headers: Record<string, string> = {};
          for (const [name, value] of m.headers) headers[headerText(name)] = headerText(value);
          onRecord({ partition: m.partition, key: m.key?.toString('utf8') ?? '', value: m.value?.toString('utf8') ?? '', headers });
          count += 1;
          if (count === total) {
            times.lastAt = performance.now();
            resolve();
          }
        });
      });
      await stream.close();
      await consumer.close();
      return times;
    },
  };
}
