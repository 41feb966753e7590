import { describe, expect, it } from 'vitest';
import { Partitioners, type Message, type Producer, type ProducerRecord } from 'kafkajs';
import { PartitionedSender, type TopicLayout } from './partitioned-send.ts';

describe('PartitionedSender', () => {
  function recordingProducer(calls: ProducerRecord[]): Producer {
    return {
      send: async (record: ProducerRecord) => {
        calls.push(record);
        return record.messages.map((m) => ({ topicName: record.topic, partition: m.partition!, errorCode: 0 }));
      },
    } as unknown as Producer;
  }

  it('places keyed messages where the default partitioner would, in one send, in order', async () => {
    const calls: ProducerRecord[] = [];
    const sender = new PartitionedSender(recordingProducer(calls), async (): Promise<TopicLayout> => ({ partitionCount: 6 }));
    const messages: Message[] = Array.from({ length: 60 }, (_, i) => ({ key: `tenant/theme/r${i % 9}`, value: `v${i}` }));
    await sender.send({ topic: 't', acks: -1, messages });

    const reference = Partitioners.DefaultPartitioner();
    const metadata = Array.from({ length: 6 }, (_, partitionId) => ({
      partitionId,
      leader: 0,
      partitionErrorCode: 0,
      replicas: [],
      isr: [],
    }));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.messages.map((m) => m.value)).toEqual(messages.map((_, i) => `v${i}`));
    for (const m of calls[0]!.messages)
      expect(m.partition).toBe(reference({ topic: 't', partitionMetadata: metadata, message: { key: m.key, value: m.value } }));
    expect(new Set(calls[0]!.messages.map((m) => m.partition)).size).toBeGreaterThan(1);
  });

  it('keeps a partition the caller chose, places keyless messages in range, and sends through `via`', async () => {
    const direct: ProducerRecord[] = [];
    const via: ProducerRecord[] = [];
    const sender = new PartitionedSender(recordingProducer(direct), async () => ({ partitionCount: 4 }));
    const messages: Message[] = [
      { key: 'k', value: 'a', partition: 3 },
      { key: null, value: 'b' },
    ];
    await sender.send({ topic: 't', acks: -1, messages }, recordingProducer(via));
    expect(direct).toHaveLength(0);
    expect(via[0]!.messages[0]!.partition).toBe(3);
    expect(via[0]!.messages[1]!.partition).toBeGreaterThanOrEqual(0);
    expect(via[0]!.messages[1]!.partition).toBeLessThan(4);
  });
});
