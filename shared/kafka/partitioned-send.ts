import { Partitioners, type Admin, type Message, type PartitionerArgs, type Producer, type RecordMetadata } from 'kafkajs';

/**
 * kafkajs 2.2.4 can resolve send() without writing part of it (tulios/kafkajs#1303, PR #1798):
 * one send() spanning several leaders keeps the responses of brokers that answered; when a broker
 * dies and its partitions move to a broker that already answered, the retry sends nothing for
 * them and send() still resolves. Observed here: a broker of three SIGKILLed under load, two
 * acknowledged records missing from the topic. A send() that touches a single partition has a
 * single leader, so a retry always re-sends it: this sender splits every send per partition.
 */
export class PartitionedSender {
  readonly #producer: Producer;
  readonly #partitionCount: (topic: string) => Promise<number>;
  readonly #partitioner = Partitioners.DefaultPartitioner();

  constructor(producer: Producer, partitionCount: (topic: string) => Promise<number>) {
    this.#producer = producer;
    this.#partitionCount = partitionCount;
  }

  async send(request: { topic: string; acks: -1 | 1; messages: Message[] }): Promise<RecordMetadata[]> {
    const { topic, acks, messages } = request;
    const count = await this.#partitionCount(topic);
    // The same murmur2 partitioner the producer would use, so keys land where they always did.
    const partitionMetadata = Array.from({ length: count }, (_, partitionId) => ({ partitionId, leader: 0 })) as PartitionerArgs['partitionMetadata'];
    const byPartition = new Map<number, Message[]>();
    for (const message of messages) {
      const partition = this.#partitioner({ topic, partitionMetadata, message });
      const list = byPartition.get(partition) ?? [];
      list.push({ ...message, partition });
      byPartition.set(partition, list);
    }
    const results = await Promise.all([...byPartition.values()].map((group) => this.#producer.send({ topic, acks, messages: group })));
    return results.flat();
  }
}

/** Partition counts read once per topic through the admin client (a topic never shrinks). */
export function cachedPartitionCount(admin: Admin): (topic: string) => Promise<number> {
  const cache = new Map<string, Promise<number>>();
  return (topic) => {
    let count = cache.get(topic);
    if (count === undefined) {
      count = admin.fetchTopicMetadata({ topics: [topic] }).then((m) => {
        const partitions = m.topics[0]?.partitions.length ?? 0;
        if (partitions === 0) throw new Error(`topic ${topic} has no partitions (does it exist?)`);
        return partitions;
      });
      count.catch(() => cache.delete(topic));
      cache.set(topic, count);
    }
    return count;
  };
}
