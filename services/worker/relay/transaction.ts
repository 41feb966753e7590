// One relay batch in one Kafka transaction, committed only while this relay still leads: the step
// of a pass (pass.ts) that can leave records on the topic, and so the one that must never do it late.
import type { PartitionedSender } from '#plumbing/kafka/partitioned-send.ts';
import type { FencedProducerUse } from '#plumbing/kafka/transaction-lanes.ts';
import type { Message } from '#plumbing/kafka/types.ts';

export interface BatchTransactionOptions {
  /** Transactional (see createRelayProducer in parts.ts): a replacement fences whatever its predecessor still sends. */
  producer: FencedProducerUse;
  /** Places the records by the applied topic's partition count first; undefined: kafkajs places them. */
  sender: PartitionedSender | undefined;
  /** Asks the database now whether this relay still leads (Leadership.confirm). */
  stillLeading: () => Promise<boolean>;
  sendTimeoutMs: number;
}

/**
 * Sends the batch in one transaction and commits it; false: the relay lost its leadership
 * meanwhile and aborted it. Bounded: an idempotent producer retries without end during an outage.
 * On a timeout or any failure the producer is replaced, which fences this attempt
 * (createRelayProducer, parts.ts). kafkajs goes on retrying a send after the timeout, and this
 * function goes on with it: once abandoned it must not commit. The next attempt publishes these
 * rows again, and a late commit of this one that reached the coordinator before the replacement's
 * InitProducerId would put them on the topic twice, older versions after newer ones.
 */
export async function commitBatch(options: BatchTransactionOptions, topic: string, messages: Message[]): Promise<boolean> {
  const { producer, sender, stillLeading, sendTimeoutMs } = options;
  const request = { topic, acks: -1 as const, messages };
  let abandoned = false;
  try {
    return await producer.use(
      async (p) => {
        const transaction = await p.transaction();
        await (sender ? sender.send(request, transaction) : transaction.send(request));
        // Still the leader right before the commit: a relay that lost it meanwhile leaves the rows
        // to the new leader (which has fenced it, unless it has not started yet).
        if (abandoned || !(await stillLeading())) {
          await transaction.abort().catch(() => {});
          return false;
        }
        await transaction.commit();
        return true;
      },
      sendTimeoutMs,
      'relay_send_timeout',
      'applied topic publish',
    );
  } catch (error) {
    abandoned = true;
    throw error;
  }
}
