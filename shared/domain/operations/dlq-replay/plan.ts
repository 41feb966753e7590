import { readRange } from '#plumbing/kafka/topic-reader.ts';
import { deadLetteredAt, entryReason, toDlqEntry, type DlqEntry } from '../dlq-records.ts';
import type { DlqClients } from './types.ts';

/** Every record on the DLQ now, oldest first; undefined when the topic does not exist. */
export async function readDlq(
  clients: Pick<DlqClients, 'kafka' | 'admin' | 'names'>,
  groupPrefix = 'bridge-dlq',
): Promise<{ topic: string; entries: DlqEntry[] } | undefined> {
  const { admin, kafka } = clients;
  const topic = clients.names.dlq;
  if (!(await admin.listTopics()).includes(topic)) return undefined;
  const watermarks = await admin.fetchTopicOffsets(topic);
  const entries: DlqEntry[] = [];
  await readRange({
    kafka,
    admin,
    topic,
    ranges: watermarks.map((w) => ({ partition: w.partition, from: BigInt(w.low), to: BigInt(w.high) })),
    groupPrefix,
    onRecords: async (records) => {
      for (const r of records) entries.push(toDlqEntry(r.partition, r.message));
    },
  });
  entries.sort((a, b) => deadLetteredAt(a) - deadLetteredAt(b) || a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)));
  return { topic, entries };
}

/** One line of a replay plan (a dry run shows it; a replay sends exactly these). */
export interface ReplayPlanRow {
  event_id: string | null;
  from: string;
  key: string | null;
  reason: string;
}

export function replayPlan(toReplay: readonly DlqEntry[]): ReplayPlanRow[] {
  return toReplay.map((e) => ({
    event_id: e.eventId,
    from: `${e.partition}:${e.offset}`,
    key: e.key?.toString('utf8') ?? null,
    reason: entryReason(e),
  }));
}
