import type { Admin } from '#plumbing/kafka/types.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { FailureMetrics } from '#domain/failures/index.ts';

export interface RetryLagMonitorOptions {
  admin: Admin;
  /** Each retry topic with the group that consumes it. */
  levels: Array<{ topic: string; groupId: string }>;
  metrics: FailureMetrics;
  logger: Logger;
  intervalMs?: number;
}

export interface RetryLag {
  byTopic: Record<string, number>;
  total: number;
}

/** Lag of each retry topic (end offset minus the group's committed offset); its sum is the waiting gauge. */
export async function measureRetryLag(admin: Admin, levels: RetryLagMonitorOptions['levels']): Promise<RetryLag> {
  const byTopic: Record<string, number> = {};
  let total = 0;
  for (const { topic, groupId } of levels) {
    const [ends, committed] = await Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId, topics: [topic] })]);
    const committedByPartition = new Map(committed[0]?.partitions.map((p) => [p.partition, Number(p.offset)]) ?? []);
    let lag = 0;
    for (const p of ends) {
      const done = committedByPartition.get(p.partition);
      const from = done === undefined || done < 0 ? Number(p.low) : done;
      lag += Math.max(0, Number(p.high) - from);
    }
    byTopic[topic] = lag;
    total += lag;
  }
  return { byTopic, total };
}

export function startRetryLagMonitor(options: RetryLagMonitorOptions): { close: () => Promise<void> } {
  let running: Promise<void> | undefined;
  const tick = async () => {
    try {
      const lag = await measureRetryLag(options.admin, options.levels);
      for (const [topic, value] of Object.entries(lag.byTopic)) options.metrics.retryTopicLag.set({ topic }, value);
      options.metrics.retryWaiting.set(lag.total);
    } catch (error) {
      options.logger.debug({ err: error }, 'retry lag measurement failed');
    }
  };
  const timer = setInterval(() => {
    running ??= tick().finally(() => {
      running = undefined;
    });
  }, options.intervalMs ?? 5_000);
  timer.unref();
  return {
    close: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
