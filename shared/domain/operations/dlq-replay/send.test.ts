import type { Message, Producer, ProducerRecord, RecordMetadata } from '#plumbing/kafka/types.ts';
import { describe, expect, it } from 'vitest';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import type { TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import { RecoveringProducer } from '#plumbing/kafka/recovering-producer.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { acknowledgedOffsets, sendPerPartition } from './send.ts';

describe('acknowledgedOffsets', () => {
  it('numbers each partition from its baseOffset, in message order', () => {
    expect(
      acknowledgedOffsets(
        [2, 0, 2],
        [
          { partition: 0, baseOffset: '7' },
          { partition: 2, baseOffset: '40' },
        ],
      ),
    ).toEqual([
      { ok: true, partition: 2, offset: 40n },
      { ok: true, partition: 0, offset: 7n },
      { ok: true, partition: 2, offset: 41n },
    ]);
  });

  // What kafkajs#1303 looks like from here: send() resolved, but without one partition's answer.
  it('a partition missing from the answer is not acknowledged (never "sent" at offset -1)', () => {
    const results = acknowledgedOffsets([0, 1], [{ partition: 0, baseOffset: '41' }]);
    expect(results[0]).toEqual({ ok: true, partition: 0, offset: 41n });
    expect(results[1]).toMatchObject({
      ok: false,
      partition: 1,
      error: expect.stringMatching(/no offset for partition 1: not acknowledged/),
    });
    expect(acknowledgedOffsets([3], [{ partition: 3, baseOffset: '-1' }])[0]).toMatchObject({ ok: false });
  });
});

/** A stand-in kafkajs producer: records every send and answers as the test says. */
class FakeProducer {
  readonly sends: ProducerRecord[] = [];
  constructor(
    readonly id: number,
    private readonly answer: (record: ProducerRecord, id: number) => Promise<RecordMetadata[]>,
  ) {}
  async connect() {}
  async disconnect() {}
  send = (record: ProducerRecord) => {
    this.sends.push(record);
    return this.answer(record, this.id);
  };
}

const PARTITIONS = 4;
const layout = async (): Promise<TopicLayout> => ({
  partitionCount: PARTITIONS,
});

function keyOn(partition: number, n = 0): string {
  for (let i = 0; ; i += 1) {
    const key = `tenant/theme/k${n}-${i}`;
    if (partitionForKey(key, PARTITIONS) === partition) return key;
  }
}

function harness(answer: (record: ProducerRecord, id: number) => Promise<RecordMetadata[]>) {
  const producers: FakeProducer[] = [];
  const producer = new RecoveringProducer({
    create: () => {
      const p = new FakeProducer(producers.length + 1, answer);
      producers.push(p);
      return p as unknown as Producer;
    },
    connectTimeoutMs: 1000,
    logger: createLogger({ name: 'test', level: 'silent' }),
    name: 'test',
  });
  return { producer, producers };
}

const ok = (record: ProducerRecord): Promise<RecordMetadata[]> =>
  Promise.resolve([
    {
      topicName: record.topic,
      partition: record.messages[0]!.partition!,
      errorCode: 0,
      baseOffset: String(100 * record.messages[0]!.partition!),
    },
  ]);

describe('sendPerPartition', () => {
  it('sends each partition on its own and reports every record', async () => {
    const { producer, producers } = harness(async (record) => ok(record));
    const messages: Message[] = [
      { key: keyOn(1), value: 'a' },
      { key: keyOn(0), value: 'b' },
      { key: keyOn(1, 1), value: 'c' },
      { key: keyOn(3), value: 'd' },
    ];
    const results = await sendPerPartition(producer, layout, 'events', messages);
    expect(results).toEqual([
      { ok: true, partition: 1, offset: 100n },
      { ok: true, partition: 0, offset: 0n },
      { ok: true, partition: 1, offset: 101n },
      { ok: true, partition: 3, offset: 300n },
    ]);
    expect(producers).toHaveLength(1);
    expect(producers[0]!.sends.map((s) => [...new Set(s.messages.map((m) => m.partition))])).toEqual([[0], [1], [3]]);
    expect(producers[0]!.sends.every((s) => s.acks === -1)).toBe(true);
  });

  it('a failed partition fails only its records, and the next send goes through a new producer', async () => {
    const { producer, producers } = harness(async (record, id) => {
      if (record.messages[0]!.partition === 0)
        throw new Error('The request included a message larger than the max message size the server will accept');
      return ok(record).then((m) => m.map((x) => ({ ...x, baseOffset: String(Number(x.baseOffset) + id) })));
    });
    const messages: Message[] = [
      { key: keyOn(0), value: 'big' },
      { key: keyOn(2), value: 'c' },
      { key: keyOn(3), value: 'd' },
    ];
    const results = await sendPerPartition(producer, layout, 'events', messages);
    expect(results[0]).toMatchObject({ ok: false, partition: 0, error: expect.stringMatching(/larger than the max message size/) });
    // Partition 2 and 3 went through producer 2: the one that failed was never used again.
    expect(results.slice(1)).toEqual([
      { ok: true, partition: 2, offset: 202n },
      { ok: true, partition: 3, offset: 302n },
    ]);
    expect(producers.map((p) => p.sends.length)).toEqual([1, 2]);
  });

  it('a send that resolves without its partition is a failure', async () => {
    const { producer } = harness(async (record) => (record.messages[0]!.partition === 1 ? [] : ok(record)));
    const results = await sendPerPartition(producer, layout, 'events', [
      { key: keyOn(1), value: 'x' },
      { key: keyOn(2), value: 'y' },
    ]);
    expect(results[0]).toMatchObject({ ok: false, partition: 1 });
    expect(results[1]).toEqual({ ok: true, partition: 2, offset: 200n });
  });

  it('a keyless record is a send of its own', async () => {
    const { producer, producers } = harness(async (record) => ok(record));
    const results = await sendPerPartition(producer, layout, 'events', [
      { key: null, value: 'x' },
      { key: null, value: 'y' },
    ]);
    expect(results.every((r) => r.ok)).toBe(true);
    expect(producers[0]!.sends.map((s) => s.messages.length)).toEqual([1, 1]);
  });
});
