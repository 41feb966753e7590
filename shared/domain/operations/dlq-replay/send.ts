import type { Message } from '#plumbing/kafka/types.ts';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { PartitionedSender, type TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import type { RecoveringProducer } from '#plumbing/kafka/recovering-producer.ts';

/** What the broker answered for one replayed record. */
export type SendResult = { ok: true; partition: number; offset: bigint } | { ok: false; partition: number | undefined; error: string };

/**
 * Each message's offset from a send's answer: a partition's messages are appended in order from its
 * baseOffset. A partition the answer does not mention was not acknowledged (unpatched kafkajs could
 * resolve a send without part of it, kafkajs#1303), so its records are failures, never "sent" at
 * offset -1.
 */
export function acknowledgedOffsets(
  partitions: readonly number[],
  metadata: ReadonlyArray<{ partition: number; baseOffset?: string }>,
): SendResult[] {
  const next = new Map<number, bigint>();
  for (const m of metadata) if (m.baseOffset !== undefined && BigInt(m.baseOffset) >= 0n) next.set(m.partition, BigInt(m.baseOffset));
  return partitions.map((partition) => {
    const offset = next.get(partition);
    if (offset === undefined)
      return { ok: false, partition, error: `the broker's answer has no offset for partition ${partition}: not acknowledged` };
    next.set(partition, offset + 1n);
    return { ok: true, partition, offset };
  });
}

const REPLAY_SEND_TIMEOUT_MS = 30_000;

/**
 * Sends the messages to `topic` one partition at a time, in partition order, and reports each
 * message's own result. A send per partition means a partition the broker refuses
 * (record too large, no leader) fails only its own records. After a failed or timed-out send the
 * producer is replaced (RecoveringProducer) before the next partition's send.
 */
export async function sendPerPartition(
  producer: RecoveringProducer,
  layout: (topic: string) => Promise<TopicLayout>,
  topic: string,
  messages: Message[],
): Promise<SendResult[]> {
  const { partitionCount } = await layout(topic);
  const sender = new PartitionedSender({ send: () => Promise.reject(new Error('sends go through the current producer')) }, layout);
  // Keyed records go where the ingress puts them (murmur2); each keyless one is a send of its own,
  // placed by the sender's partitioner.
  const groups = new Map<string, number[]>();
  messages.forEach((m, i) => {
    if (m.key !== null && m.key !== undefined) m.partition = partitionForKey(m.key, partitionCount);
    const group = m.partition === undefined ? `keyless-${i}` : `partition-${m.partition}`;
    const list = groups.get(group);
    if (list) list.push(i);
    else groups.set(group, [i]);
  });
  const results: SendResult[] = new Array<SendResult>(messages.length);
  const ordered = [...groups.values()].sort(
    (a, b) => (messages[a[0]!]!.partition ?? partitionCount) - (messages[b[0]!]!.partition ?? partitionCount),
  );
  for (const indices of ordered) {
    const batch = indices.map((i) => messages[i]!);
    try {
      const metadata = await producer.use(
        (p) => sender.send({ topic, acks: -1, messages: batch }, p),
        REPLAY_SEND_TIMEOUT_MS,
        'replay_send_timeout',
        `replay send to ${topic}/${batch[0]!.partition ?? '?'}`,
      );
      acknowledgedOffsets(
        batch.map((m) => m.partition!),
        metadata,
      ).forEach((r, j) => (results[indices[j]!] = r));
    } catch (error) {
      const text = (error as Error).message;
      for (const i of indices) results[i] = { ok: false, partition: messages[i]!.partition ?? undefined, error: text };
    }
  }
  return results;
}
