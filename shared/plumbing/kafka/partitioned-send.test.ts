import { describe, expect, it } from 'vitest';
import { Partitioners, type Message, type Producer, type ProducerRecord } from 'kafkajs';
import { PartitionedSender, type TopicLayout } from './partitioned-send.ts';

describe('PartitionedSender', () => {
  it('sends one partition per send() when leaders are unknown, on the partition the default partitioner picks, in order per key', async () => {
    const calls: ProducerRecord[] = [];
    const producer = {
      send: async (record: ProducerRecord) => {
        calls.push(record);
        return [{ topicName: record.topic, partition: record.messages[0]!.partition!, errorCode: 0 }];
      },
    } as unknown as Producer;
    const sender = new PartitionedSender(producer, async (): Promise<TopicLayout> => ({ partitionCount: 6, leaders: new Map() }));
    const messages: Message[] = Array.from({ length: 60 }, (_, i) => ({ key: `tenant/theme/r${i % 9}`, value: `v${i}` }));
    const results = await sender.send({ topic: 't', acks: -1, messages });

    const reference = Partitioners.DefaultPartitioner();
    const metadata = Array.from({ length: 6 }, (_, partitionId) => ({
      partitionId,
      leader: 0,
      partitionErrorCode: 0,
      replicas: [],
      isr: [],
    }));
    for (const call of calls) {
      const partitions = new Set(call.messages.map((m) => m.partition));
      expect(partitions.size).toBe(1);
      for (const m of call.messages)
        expect(m.partition).toBe(reference({ topic: 't', partitionMetadata: metadata, message: { key: m.key, value: m.value } }));
    }
    expect(calls.flatMap((c) => c.messages)).toHaveLength(60);
    expect(results).toHaveLength(calls.length);
    for (let r = 0; r < 9; r += 1) {
      const values = calls
        .flatMap((c) => c.messages)
        .filter((m) => m.key === `tenant/theme/r${r}`)
        .map((m) => Number(String(m.value).slice(1)));
      expect(values).toEqual([...values].sort((a, b) => a - b));
    }
  });

  it('groups partitions by leader: one send per broker, never one spanning two leaders', async () => {
    const calls: ProducerRecord[] = [];
    const producer = {
      send: async (record: ProducerRecord) => {
        calls.push(record);
        return record.messages.map((m) => ({ topicName: record.topic, partition: m.partition!, errorCode: 0 }));
      },
    } as unknown as Producer;
    const leaders = new Map([
      [0, 1],
      [1, 2],
      [2, 3],
      [3, 1],
      [4, 2],
      [5, 3],
    ]);
    const sender = new PartitionedSender(producer, async () => ({ partitionCount: 6, leaders }));
    const messages: Message[] = Array.from({ length: 90 }, (_, i) => ({ key: `tenant/theme/r${i}`, value: `v${i}` }));
    await sender.send({ topic: 't', acks: -1, messages });
    expect(calls.length).toBeLessThanOrEqual(3);
    for (const call of calls) expect(new Set(call.messages.map((m) => leaders.get(m.partition!))).size).toBe(1);
    expect(calls.flatMap((c) => c.messages)).toHaveLength(90);

    calls.length = 0;
    const single = new PartitionedSender(producer, async () => ({
      partitionCount: 6,
      leaders: new Map([0, 1, 2, 3, 4, 5].map((p) => [p, 1])),
    }));
    await single.send({ topic: 't', acks: -1, messages });
    expect(calls).toHaveLength(1);
  });
});
