// Consumer lag per partition from committed offsets and watermarks: `bridge lag` and the console.
import type { Admin } from 'kafkajs';

export interface LagRow {
  group: string;
  topic: string;
  partition: number;
  /** null: the group has committed nothing on this partition yet. */
  committed: string | null;
  low: string;
  end: string;
  /** Records not yet consumed; from the start of the log when nothing is committed. */
  lag: number;
}

/** The main group on the events topic and `<group>.retry.<n>` on `<events>.retry.<n>`. */
export function lagTargets(group: string, events: string, retries: string[]): Array<{ group: string; topic: string }> {
  return [{ group, topic: events }, ...retries.map((topic, i) => ({ group: `${group}.retry.${i + 1}`, topic }))];
}

export async function groupLag(admin: Admin, group: string, topic: string): Promise<LagRow[]> {
  const [watermarks, committed] = await Promise.all([
    admin.fetchTopicOffsets(topic),
    admin.fetchOffsets({ groupId: group, topics: [topic] }),
  ]);
  const byPartition = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, p.offset] as const));
  return watermarks
    .sort((a, b) => a.partition - b.partition)
    .map((w) => {
      const raw = byPartition.get(w.partition);
      const current = raw !== undefined && BigInt(raw) >= 0n ? raw : null;
      const from = current ?? w.low;
      const lag = BigInt(w.high) - BigInt(from);
      return { group, topic, partition: w.partition, committed: current, low: w.low, end: w.high, lag: Number(lag < 0n ? 0n : lag) };
    });
}
