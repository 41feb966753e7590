import { Partitioners, type Admin, type Message, type PartitionerArgs, type Producer, type RecordMetadata } from 'kafkajs';
import { partitionForKey } from './murmur2.ts';

/** What a sender needs to know of a topic. */
export interface TopicLayout {
  partitionCount: number;
}

/**
 * Places each message on its partition before kafkajs sees it, then sends them in one send():
 * keyed records by the Java client's murmur2 (shared/plumbing/kafka/murmur2.ts, so keys land where
 * any other client puts them, without kafkajs's slower partitioner running per message), keyless
 * ones by kafkajs's default partitioner. The message keeps its partition (set in place), so a
 * caller can tell which partition each record went to.
 *
 * A send spanning several partition leaders is safe: the kafkajs patch keeps the broker's answer
 * per partition across retries, so a partition whose leader moved is sent again wherever it went
 * (tulios/kafkajs#1303; test/failures/partial-send.test.ts).
 */
export class PartitionedSender {
  readonly #producer: Pick<Producer, 'send'>;
  readonly #layout: (topic: string) => Promise<TopicLayout>;
  readonly #partitioner = Partitioners.DefaultPartitioner();

  constructor(producer: Pick<Producer, 'send'>, layout: (topic: string) => Promise<TopicLayout>) {
    this.#producer = producer;
    this.#layout = layout;
  }

  /** Sends through the producer, or through `via` (a transaction of it) when given. */
  async send(
    request: { topic: string; acks: -1 | 1; messages: Message[] },
    via: Pick<Producer, 'send'> = this.#producer,
  ): Promise<RecordMetadata[]> {
    const { topic, messages } = request;
    const { partitionCount } = await this.#layout(topic);
    let partitionMetadata: PartitionerArgs['partitionMetadata'] | undefined;
    for (const message of messages) {
      if (message.partition !== undefined && message.partition !== null) continue;
      if (message.key !== undefined && message.key !== null) message.partition = partitionForKey(message.key, partitionCount);
      else {
        partitionMetadata ??= Array.from({ length: partitionCount }, (_, partitionId) => ({
          partitionId,
          leader: 0,
        })) as PartitionerArgs['partitionMetadata'];
        message.partition = this.#partitioner({ topic, partitionMetadata, message });
      }
    }
    return via.send(request);
  }
}

export function layoutFromMetadata(partitions: ReadonlyArray<{ partitionId: number }>): TopicLayout {
  return { partitionCount: partitions.length };
}

/** Topic layouts read through the admin client, reused for maxAgeMs (added partitions are seen within it). */
export function topicLayouts(admin: Admin, maxAgeMs = 30_000): (topic: string) => Promise<TopicLayout> {
  const cache = new Map<string, { at: number; layout: Promise<TopicLayout> }>();
  return (topic) => {
    const cached = cache.get(topic);
    if (cached && Date.now() - cached.at < maxAgeMs) return cached.layout;
    const layout = admin.fetchTopicMetadata({ topics: [topic] }).then((m) => {
      const partitions = m.topics[0]?.partitions ?? [];
      if (partitions.length === 0) throw new Error(`topic ${topic} has no partitions (does it exist?)`);
      return layoutFromMetadata(partitions);
    });
    // A failed read must not stick; a stale but good layout is still better than none.
    layout.catch(() => {
      if (cache.get(topic)?.layout === layout) cache.delete(topic);
    });
    cache.set(topic, { at: Date.now(), layout });
    return layout;
  };
}
