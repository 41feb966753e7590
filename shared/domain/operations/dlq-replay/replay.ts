import type { Message } from '#plumbing/kafka/types.ts';
import type { Queryable } from '#domain/store/session.ts';
import { headerText } from '#plumbing/kafka/headers.ts';
import { topicLayouts } from '#plumbing/kafka/partitioned-send.ts';
import { createRecoveringProducer } from '#plumbing/kafka/producers.ts';
import { REPLAYED_FROM_HEADER, replayMessage, type DlqEntry } from '../dlq-records.ts';
import { inboxStatuses, type InboxStatus } from './inbox.ts';
import { sendPerPartition } from './send.ts';
import type { DlqClients, ReplayOutcome, SentRecord } from './types.ts';
import { waitForOutcomes } from './wait.ts';

export interface ReplayOptions {
  /** Wait for each record's outcome (needs the pool); otherwise report "sent". */
  wait: boolean;
  timeoutMs: number;
  /** Told once the records are sent, before the wait (the CLI prints it). */
  onSent?: (sent: number, notSent: number) => void;
}

/**
 * Republishes the records (original key, body and ingress headers, plus replayed-from) to the
 * events topic and reports each one's outcome, in the order given.
 */
export async function replayDeadLetters(
  clients: DlqClients,
  pool: Queryable | undefined,
  toReplay: readonly DlqEntry[],
  options: ReplayOptions,
): Promise<ReplayOutcome[]> {
  const { admin, names } = clients;
  const events = names.events;
  const wait = options.wait && pool !== undefined;
  const before = wait ? await inboxStatuses(pool, toReplay) : new Map<string, InboxStatus>();
  const dlqBefore = wait
    ? new Map((await admin.fetchTopicOffsets(names.dlq)).map((w) => [w.partition, BigInt(w.high)]))
    : new Map<number, bigint>();
  const producer = createRecoveringProducer(clients.kafka, { name: 'dlq-replay', logger: clients.logger, connectTimeoutMs: 10_000 });
  try {
    await producer.connect();
    const messages: Message[] = toReplay.map((e) => replayMessage(e, names.dlq));
    // Idempotent, acks=all: an acknowledged record is durable on the events topic.
    const results = await sendPerPartition(producer, topicLayouts(admin), events, messages);
    const sent: SentRecord[] = [];
    const notSent: ReplayOutcome[] = [];
    toReplay.forEach((entry, i) => {
      const r = results[i]!;
      const from = `${entry.partition}:${entry.offset}`;
      if (r.ok)
        sent.push({
          entry,
          marker: headerText(messages[i]!.headers ?? {}, REPLAYED_FROM_HEADER)!,
          partition: r.partition,
          offset: r.offset,
        });
      else
        notSent.push({
          event_id: entry.eventId,
          from,
          ...(r.partition === undefined ? {} : { partition: r.partition }),
          status: 'send_failed',
          ok: false,
          detail: r.error,
        });
    });
    options.onSent?.(sent.length, notSent.length);

    const settled: ReplayOutcome[] = wait
      ? await waitForOutcomes(clients, pool, sent, before, dlqBefore, options.timeoutMs)
      : sent.map((s) => ({
          event_id: s.entry.eventId,
          from: `${s.entry.partition}:${s.entry.offset}`,
          partition: s.partition,
          offset: s.offset.toString(),
          status: 'sent',
          ok: true,
          detail: `${events}/${s.partition}@${s.offset}`,
        }));
    // In the order the records were selected, sent or not.
    const byFrom = new Map([...settled, ...notSent].map((o) => [o.from, o]));
    return toReplay.map((e) => byFrom.get(`${e.partition}:${e.offset}`)!);
  } finally {
    await producer.close();
  }
}
