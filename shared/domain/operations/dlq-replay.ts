// Reading the DLQ and replaying from it: shared by `bridge dlq` (services/cli) and the console's
// dead-letter page. Every function takes the clients it uses; none owns or closes them.
import { createHash } from 'node:crypto';
import type { Admin, Kafka, Message } from '#plumbing/kafka/types.ts';
import { tenantScopedKey } from '#domain/apply/index.ts';
import { eventFingerprint, parseEvent } from '#domain/contract/index.ts';
import { selectInboxPayloads, selectInboxStatuses } from '#domain/store/inbox.ts';
import type { Queryable } from '#domain/store/session.ts';
import { headerText } from '#plumbing/kafka/headers.ts';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { PartitionedSender, topicLayouts, type TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import { createRecoveringProducer } from '#plumbing/kafka/producers.ts';
import type { RecoveringProducer } from '#plumbing/kafka/recovering-producer.ts';
import { readRange } from '#plumbing/kafka/topic-reader.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { deadLetteredAt, entryReason, inboxKeyOf, REPLAYED_FROM_HEADER, replayMessage, toDlqEntry, type DlqEntry } from './dlq-records.ts';

/** What the DLQ operations use: connected clients owned by the caller. */
export interface DlqClients {
  kafka: Kafka;
  admin: Admin;
  names: TopicNames;
  /** The workers' consumer group (a replayed record without an event id settles by its commits). */
  group: string;
  logger: Logger;
}

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

export interface InboxStatus {
  status: string;
  reason: string | null;
  attempts: number;
  body_sha256: string;
  updated_at: Date;
}
/**
 * Of entries whose bytes differ from their inbox row's, those whose content differs too (as the
 * worker decides: a redelivery with other whitespace or delivery_attempt is the same event).
 */
async function withOtherContent(pool: Queryable, entries: readonly DlqEntry[]): Promise<Set<DlqEntry>> {
  if (entries.length === 0) return new Set();
  const rows = await selectInboxPayloads(
    pool,
    entries.map((e) => ({ tenant_id: e.tenantId, event_id: e.eventId })),
  );
  const stored = new Map(rows.map((r) => [tenantScopedKey(r.tenant_id, r.event_id), r]));
  const different = new Set<DlqEntry>();
  for (const entry of entries) {
    const row = stored.get(inboxKeyOf(entry) ?? '');
    const storedEvent = row?.payload == null ? undefined : parseEvent(Buffer.from(row.payload, 'utf8'));
    // As the worker decides (shared/domain/apply/decide.ts): the stored body's fingerprint, or the one
    // retention kept when it pruned the body.
    const storedFingerprint = storedEvent?.ok ? eventFingerprint(storedEvent.envelope) : (row?.fingerprint ?? undefined);
    const same = entry.envelope !== null && storedFingerprint !== undefined && storedFingerprint === eventFingerprint(entry.envelope);
    if (!same) different.add(entry);
  }
  return different;
}

/** Keyed by inboxKeyOf(entry): event ids are scoped to their tenant. */
export async function inboxStatuses(pool: Queryable, entries: readonly DlqEntry[]): Promise<Map<string, InboxStatus>> {
  const known = entries.filter((e) => inboxKeyOf(e) !== undefined);
  if (known.length === 0) return new Map();
  const rows = await selectInboxStatuses(
    pool,
    known.map((e) => ({ tenant_id: e.tenantId, event_id: e.eventId })),
  );
  return new Map(rows.map((r) => [tenantScopedKey(r.tenant_id, r.event_id), r]));
}

export function statusOf(statuses: Map<string, InboxStatus> | undefined, entry: DlqEntry): InboxStatus | undefined {
  const key = inboxKeyOf(entry);
  return key === undefined ? undefined : statuses?.get(key);
}

export const SETTLED_OK = new Set(['applied', 'stale', 'duplicate', 'duplicate_version']);

export interface ReplayOutcome {
  event_id: string | null;
  /** Where on the DLQ the replayed record came from. */
  from: string;
  /** Where the replay landed on the events topic, from the broker's answer (offset absent when not written). */
  partition?: number;
  offset?: string;
  status: string;
  ok: boolean;
  detail?: string;
}

interface SentRecord {
  entry: DlqEntry;
  /** The replayed-from header value: how a DLQ record of this replay is recognised. */
  marker: string;
  partition: number;
  offset: bigint;
}

function sha256(value: Buffer | null): string {
  return createHash('sha256')
    .update(value ?? Buffer.alloc(0))
    .digest('hex');
}

/**
 * Settles each replayed record by the first definitive signal: its inbox row reaching a final
 * status, or a new DLQ record carrying its replayed-from marker. The worker writes the DLQ before it
 * commits the offset, so once the group has committed past a record with no such DLQ record, the
 * record was not dead-lettered again (the only signal for records without an event id).
 */
async function waitForOutcomes(
  clients: DlqClients,
  pool: Queryable,
  sent: SentRecord[],
  before: Map<string, InboxStatus>,
  dlqBefore: Map<number, bigint>,
  timeoutMs: number,
): Promise<ReplayOutcome[]> {
  const { admin, names, group } = clients;
  const from = (s: SentRecord) => `${s.entry.partition}:${s.entry.offset}`;
  const results = new Map<SentRecord, ReplayOutcome>();
  const settle = (s: SentRecord, outcome: Omit<ReplayOutcome, 'event_id' | 'from'>) =>
    results.set(s, { event_id: s.entry.eventId, from: from(s), partition: s.partition, offset: s.offset.toString(), ...outcome });

  // A replay cannot apply an event whose id the inbox holds with other content: it is quarantined again.
  const otherBytes = sent.filter((s) => {
    const was = statusOf(before, s.entry);
    return was !== undefined && was.body_sha256 !== sha256(s.entry.value);
  });
  const otherContent = await withOtherContent(
    pool,
    otherBytes.map((s) => s.entry),
  );
  for (const s of otherBytes) {
    if (otherContent.has(s.entry)) {
      settle(s, { status: 'quarantined', ok: false, detail: 'event_id is recorded with other content; the replay is quarantined again' });
    }
  }

  // DLQ ends from before the send: a worker may dead-letter a replayed record again before this
  // function even starts, and that record must still be read.
  const dlqSeen = new Map(dlqBefore);
  const againByMarker = new Map<string, DlqEntry>();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = sent.filter((s) => !results.has(s));
    if (open.length === 0) break;

    const highs = await admin.fetchTopicOffsets(names.dlq);
    const grown = highs.filter((w) => BigInt(w.high) > (dlqSeen.get(w.partition) ?? 0n));
    if (grown.length > 0) {
      await readRange({
        kafka: clients.kafka,
        admin,
        topic: names.dlq,
        ranges: grown.map((w) => ({ partition: w.partition, from: dlqSeen.get(w.partition) ?? 0n, to: BigInt(w.high) })),
        groupPrefix: 'bridge-dlq',
        onRecords: async (records) => {
          for (const r of records) {
            const entry = toDlqEntry(r.partition, r.message);
            const marker = headerText(entry.headers, REPLAYED_FROM_HEADER);
            if (marker) againByMarker.set(marker, entry);
          }
        },
      });
      for (const w of grown) dlqSeen.set(w.partition, BigInt(w.high));
    }
    const statuses = await inboxStatuses(
      pool,
      open.map((s) => s.entry),
    );
    const [committedList] = await admin.fetchOffsets({ groupId: group, topics: [names.events] });
    const committed = new Map((committedList?.partitions ?? []).map((p) => [p.partition, BigInt(p.offset)]));

    for (const s of open) {
      const again = againByMarker.get(s.marker);
      const row = statusOf(statuses, s.entry);
      if (again) {
        settle(s, {
          status: 'dead_lettered',
          ok: false,
          detail: `dead-lettered again (${entryReason(again)}) at ${again.partition}:${again.offset}`,
        });
      } else if (row && SETTLED_OK.has(row.status)) {
        const was = statusOf(before, s.entry);
        settle(s, {
          status: row.status,
          ok: true,
          ...(was && SETTLED_OK.has(was.status) ? { detail: `was already ${was.status} before the replay` } : {}),
        });
      } else if (row?.status === 'quarantined') {
        settle(s, { status: 'quarantined', ok: false, ...(row.reason ? { detail: row.reason } : {}) });
      } else if (!s.entry.eventId && (committed.get(s.partition) ?? -1n) > s.offset) {
        settle(s, { status: 'consumed', ok: true, detail: 'no event id: consumed by the workers and not dead-lettered again' });
      }
    }
    if (Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return sent.map((s) => {
    const done = results.get(s);
    if (done) return done;
    const now = statusOf(before, s.entry);
    return {
      event_id: s.entry.eventId,
      from: from(s),
      partition: s.partition,
      offset: s.offset.toString(),
      status: 'timeout',
      ok: false,
      detail: `no outcome within ${timeoutMs} ms (inbox status before the replay: ${now?.status ?? 'none'}; is a worker running for group ${group}?)`,
    };
  });
}

/** What the broker answered for one replayed record. */
export type SendResult = { ok: true; partition: number; offset: bigint } | { ok: false; partition: number | undefined; error: string };

/**
 * Each message's offset from a send's answer: a partition's messages are appended in order from its
 * baseOffset. A partition the answer does not mention was not acknowledged (kafkajs#1303 resolves a
 * send without part of it), so its records are failures, never "sent" at offset -1.
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
 * message's own result. A send per partition has a single leader, so the kafkajs hazard of a send
 * across leaders (PartitionedSender) cannot drop part of it, and a partition the broker refuses
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
