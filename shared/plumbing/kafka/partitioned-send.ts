import { Partitioners, type Admin, type Message, type PartitionerArgs, type Producer, type RecordMetadata } from 'kafkajs';
import { partitionForKey } from './murmur2.ts';

/** What a sender needs to know of a topic: its partition count and each partition's leader. */
export interface TopicLayout {
  partitionCount: number;
  /** partition -> leader broker id, as last seen in the cluster metadata. */
  leaders: ReadonlyMap<number, number>;
}

/**
 * kafkajs 2.2.4 can resolve send() without writing part of it (tulios/kafkajs#1303, PR #1798):
 * one send() spanning several leaders keeps the responses of brokers that answered; when a broker
 * dies and its partitions move to a broker that already answered, the retry sends nothing for
 * them and send() still resolves. Observed here: a broker of three SIGKILLed under load, two
 * acknowledged records missing from the topic. A send() whose partitions share one leader has no
 * other broker that could have answered already, so a retry always re-sends it: this sender splits
 * every send per partition leader (one send on a single broker, so no extra round trips there).
 * Leaders come from metadata at most a second old; partitions with an unknown leader go alone.
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
    const { topic, acks, messages } = request;
    const { partitionCount, leaders } = await this.#layout(topic);
    let partitionMetadata: PartitionerArgs['partitionMetadata'] | undefined;
    const byLeader = new Map<string, Message[]>();
    for (const message of messages) {
      // The default partitioner's murmur2 for keyed records (so keys land where they always did);
      // kafkajs's own partitioner for the rest. The message keeps its partition (set in place).
      let partition = message.partition;
      if (partition === undefined || partition === null) {
        if (message.key !== undefined && message.key !== null) partition = partitionForKey(message.key, partitionCount);
        else {
          partitionMetadata ??= Array.from({ length: partitionCount }, (_, partitionId) => ({
            partitionId,
            leader: 0,
          })) as PartitionerArgs['partitionMetadata'];
          partition = this.#partitioner({ topic, partitionMetadata, message });
        }
        message.partition = partition;
      }
      const leader = leaders.get(partition);
      const group = leader === undefined ? `partition-${partition}` : `leader-${leader}`;
      const list = byLeader.get(group);
      if (list) list.push(message);
      else byLeader.set(group, [message]);
    }
    const results = await Promise.all([...byLeader.values()].map((group) => via.send({ topic, acks, messages: group })));
    return results.flat();
  }
}

export function layoutFromMetadata(partitions: ReadonlyArray<{ partitionId: number; leader: number }>): TopicLayout {
  return {
    partitionCount: partitions.length,
    leaders: new Map(partitions.filter((p) => p.leader >= 0).map((p) => [p.partitionId, p.leader])),
  };
}

/** Topic layouts read through the admin client, reused for maxAgeMs so leader moves are seen soon. */
export function topicLayouts(admin: Admin, maxAgeMs = 1000): (topic: string) => Promise<TopicLayout> {
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
