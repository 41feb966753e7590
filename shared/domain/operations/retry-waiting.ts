// How many events wait on each retry topic and when the next is due: the retry group's lag, and
// the retry-not-before header of the first unconsumed record of each partition that lags (records
// of one level are due in the order they were written: one delay per level).
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import { decodeRetryInfo } from '#domain/failures/index.ts';
import { groupLag } from '#plumbing/kafka/lag.ts';
import { readRange } from '#plumbing/kafka/topic-reader.ts';

export interface RetryTopicWaiting {
  topic: string;
  group: string;
  level: number;
  waiting: number;
  /** The earliest retry-not-before among the next records; null when none waits (or none decodes). */
  nextDueAt: Date | null;
}

export async function retryWaiting(
  clients: { kafka: Kafka; admin: Admin },
  group: string,
  retryTopics: readonly string[],
  options: { idleTimeoutMs?: number } = {},
): Promise<RetryTopicWaiting[]> {
  const existing = new Set(await clients.admin.listTopics());
  // The levels side by side: a page waits for the slowest, not for the sum.
  const levels = await Promise.all(
    retryTopics.map(async (topic, i): Promise<RetryTopicWaiting | undefined> => {
      const retryGroup = `${group}.retry.${i + 1}`;
      if (!existing.has(topic)) return undefined;
      const lag = await groupLag(clients.admin, retryGroup, topic);
      const waiting = lag.reduce((n, r) => n + r.lag, 0);
      let nextDueAt: Date | null = null;
      const lagging = lag.filter((r) => r.lag > 0);
      if (lagging.length > 0) {
        await readRange({
          kafka: clients.kafka,
          admin: clients.admin,
          topic,
          ranges: lagging.map((r) => {
            const from = BigInt(r.committed ?? r.low);
            return { partition: r.partition, from, to: from + 1n };
          }),
          groupPrefix: 'bridge-console-retry',
          idleTimeoutMs: options.idleTimeoutMs ?? 10_000,
          onRecords: async (records) => {
            for (const r of records) {
              const decoded = decodeRetryInfo(r.message.headers);
              if (decoded.ok && (nextDueAt === null || decoded.info.notBefore < nextDueAt)) nextDueAt = decoded.info.notBefore;
            }
          },
        });
      }
      return { topic, group: retryGroup, level: i + 1, waiting, nextDueAt };
    }),
  );
  return levels.filter((l): l is RetryTopicWaiting => l !== undefined);
}
