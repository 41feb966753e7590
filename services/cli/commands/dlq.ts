import { createHash } from 'node:crypto';
import type { Message } from 'kafkajs';
import { tenantScopedKey } from '#domain/apply/index.ts';
import { eventFingerprint, parseEvent } from '#domain/contract/index.ts';
import { headerText } from '#plumbing/kafka/headers.ts';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { PartitionedSender, topicLayouts, type TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import { createRecoveringProducer } from '#plumbing/kafka/producers.ts';
import type { RecoveringProducer } from '#plumbing/kafka/recovering-producer.ts';
import { CommandFailed, flag, parseIsoTime, stringOption, TIME_HELP, UsageError, type ParsedArgs } from '../args.ts';
import type { CommandSpec } from '../command.ts';
import { connectedAdmin, type CliContext } from '../context.ts';
import {
  deadLetteredAt,
  entryReason,
  filterEntries,
  headersAsText,
  latestPerEvent,
  inboxKeyOf,
  matchesRef,
  parseDlqRef,
  REPLAYED_FROM_HEADER,
  replayMessage,
  toDlqEntry,
  type DlqEntry,
  type DlqFilter,
} from '../dlq-records.ts';
import { renderTable } from '../output.ts';
import { selectInboxPayloads, selectInboxStatuses } from '#domain/store/inbox.ts';
import { readRange } from '../topic-reader.ts';

/** Every record on the DLQ now, oldest first. */
async function readDlq(ctx: CliContext): Promise<{ topic: string; entries: DlqEntry[] }> {
  const topic = ctx.topicNames().dlq;
  const admin = await connectedAdmin(ctx);
  if (!(await admin.listTopics()).includes(topic)) throw new CommandFailed(`DLQ topic ${topic} does not exist`);
  const watermarks = await admin.fetchTopicOffsets(topic);
  const entries: DlqEntry[] = [];
  await readRange({
    kafka: ctx.kafka(),
    admin,
    topic,
    ranges: watermarks.map((w) => ({ partition: w.partition, from: BigInt(w.low), to: BigInt(w.high) })),
    groupPrefix: 'bridge-cli-dlq',
    onRecords: async (records) => {
      for (const r of records) entries.push(toDlqEntry(r.partition, r.message));
    },
  });
  entries.sort((a, b) => deadLetteredAt(a) - deadLetteredAt(b) || a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)));
  return { topic, entries };
}

interface InboxStatus {
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
async function withOtherContent(ctx: CliContext, entries: readonly DlqEntry[]): Promise<Set<DlqEntry>> {
  if (entries.length === 0) return new Set();
  const rows = await selectInboxPayloads(
    ctx.pool(),
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
async function inboxStatuses(ctx: CliContext, entries: readonly DlqEntry[]): Promise<Map<string, InboxStatus>> {
  const known = entries.filter((e) => inboxKeyOf(e) !== undefined);
  if (known.length === 0) return new Map();
  const rows = await selectInboxStatuses(
    ctx.pool(),
    known.map((e) => ({ tenant_id: e.tenantId, event_id: e.eventId })),
  );
  return new Map(rows.map((r) => [tenantScopedKey(r.tenant_id, r.event_id), r]));
}

function statusOf(statuses: Map<string, InboxStatus> | undefined, entry: DlqEntry): InboxStatus | undefined {
  const key = inboxKeyOf(entry);
  return key === undefined ? undefined : statuses?.get(key);
}

/** The inbox status is a bonus in list/show: without DATABASE_URL they still work from Kafka alone. */
async function optionalStatuses(ctx: CliContext, entries: readonly DlqEntry[]): Promise<Map<string, InboxStatus> | undefined> {
  if (!ctx.env.DATABASE_URL) return undefined;
  try {
    return await inboxStatuses(ctx, entries);
  } catch (error) {
    ctx.out.note(`warning: inbox status unavailable (${(error as Error).message})`);
    return undefined;
  }
}

function filterFrom(args: ParsedArgs): DlqFilter {
  const sinceText = stringOption(args, 'since');
  let since: number | undefined;
  if (sinceText !== undefined) {
    since = parseIsoTime(sinceText, 'since');
    if (since === undefined) throw new UsageError(`--since must be ${TIME_HELP}, got "${sinceText}"`);
  }
  const reason = stringOption(args, 'reason');
  return { ...(since === undefined ? {} : { since }), ...(reason === undefined ? {} : { reason }) };
}

function summary(e: DlqEntry, status: InboxStatus | undefined) {
  return {
    partition: e.partition,
    offset: e.offset,
    event_id: e.eventId,
    key: e.key?.toString('utf8') ?? null,
    reason: entryReason(e),
    attempt: e.info?.attempt ?? null,
    dead_lettered_at: new Date(deadLetteredAt(e)).toISOString(),
    failed_topic: e.info?.failedTopic ?? null,
    original: e.info ? { topic: e.info.originalTopic, partition: e.info.originalPartition, offset: e.info.originalOffset } : null,
    last_error: e.info ? `${e.info.lastErrorCode}: ${e.info.lastErrorMessage}` : null,
    inbox_status: status?.status ?? null,
    header_problem: e.problem,
  };
}

const filterOptions = {
  since: {
    type: 'string',
    description: 'only records dead-lettered at or after this ISO time, with an explicit offset (Z or ±HH:MM)',
    valueName: 'time',
  },
  reason: { type: 'string', description: 'only records with this dlq-reason (e.g. invalid_envelope, retries_exhausted)', valueName: 'R' },
} as const;

export const dlqList: CommandSpec = {
  path: ['dlq', 'list'],
  summary: 'list dead-lettered records (reason, attempts, original coordinates, current inbox status)',
  usage: '[--since T] [--reason R]',
  details:
    "Reads the whole DLQ topic without committing anything. With DATABASE_URL set it also shows each event's inbox status (e.g. applied after a replay).",
  examples: ['bridge dlq list', 'bridge dlq list --since 2026-01-31T00:00:00Z --reason retries_exhausted --json'],
  options: { ...filterOptions },
  mutating: false,
  async run(args, ctx) {
    const filter = filterFrom(args);
    const { topic, entries } = await readDlq(ctx);
    const selected = filterEntries(entries, filter);
    const statuses = await optionalStatuses(ctx, selected);
    const rows = selected.map((e) => summary(e, statusOf(statuses, e)));
    const reasons: Record<string, number> = {};
    for (const r of rows) reasons[r.reason] = (reasons[r.reason] ?? 0) + 1;
    ctx.out.result(
      { topic, total: entries.length, count: rows.length, reasons, records: rows },
      [
        renderTable(
          ['dead-lettered', 'partition:offset', 'event_id', 'reason', 'attempt', 'inbox', 'last error'],
          rows.map((r) => [
            r.dead_lettered_at,
            `${r.partition}:${r.offset}`,
            r.event_id,
            r.reason,
            r.attempt,
            r.inbox_status,
            r.last_error?.slice(0, 60),
          ]),
        ),
        '',
        `${rows.length} of ${entries.length} records on ${topic}${
          Object.keys(reasons).length
            ? ` (${Object.entries(reasons)
                .map(([k, v]) => `${k} ${v}`)
                .join(', ')})`
            : ''
        }`,
      ].join('\n'),
    );
  },
};

export const dlqShow: CommandSpec = {
  path: ['dlq', 'show'],
  summary: 'show one dead-lettered record in full: headers, failure details, key and body',
  usage: '<event_id|partition:offset>',
  details: 'An event dead-lettered more than once shows every record, newest first. Exit 1 when none matches.',
  examples: ['bridge dlq show evt_0f3c2d', 'bridge dlq show 3:1042 --json'],
  options: {},
  positionals: true,
  mutating: false,
  async run(args, ctx) {
    if (args.positionals.length !== 1) throw new UsageError('dlq show expects one <event_id|partition:offset>');
    const ref = parseDlqRef(args.positionals[0]!);
    const { topic, entries } = await readDlq(ctx);
    const matches = entries.filter((e) => matchesRef(e, ref)).reverse();
    if (matches.length === 0) throw new CommandFailed(`no record ${args.positionals[0]} on ${topic}`);
    const statuses = await optionalStatuses(ctx, matches);
    const records = matches.map((e) => {
      const body = e.value?.toString('utf8') ?? null;
      let bodyJson: unknown;
      try {
        bodyJson = body === null ? null : JSON.parse(body);
      } catch {
        bodyJson = undefined;
      }
      return { ...summary(e, statusOf(statuses, e)), headers: headersAsText(e.headers), body, body_json: bodyJson };
    });
    ctx.out.result(
      { topic, records: records.map(({ body_json: _b, ...r }) => r) },
      records
        .map((r) =>
          [
            `${topic} ${r.partition}:${r.offset}  event ${r.event_id ?? '(none)'}  key ${r.key ?? '(null)'}`,
            `reason: ${r.reason}   attempt: ${r.attempt ?? '-'}   dead-lettered: ${r.dead_lettered_at}   inbox: ${r.inbox_status ?? '-'}`,
            r.original
              ? `original: ${r.original.topic}/${r.original.partition}@${r.original.offset}   failed on: ${r.failed_topic}`
              : `headers: ${r.header_problem}`,
            r.last_error ? `last error: ${r.last_error}` : '',
            'headers:',
            ...Object.entries(r.headers).map(([k, v]) => `  ${k}: ${v}`),
            'body:',
            r.body_json !== undefined ? JSON.stringify(r.body_json, null, 2) : (r.body ?? '(null)'),
          ]
            .filter((l) => l !== '')
            .join('\n'),
        )
        .join('\n\n'),
    );
  },
};

const SETTLED_OK = new Set(['applied', 'stale', 'duplicate', 'duplicate_version']);

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
  ctx: CliContext,
  sent: SentRecord[],
  before: Map<string, InboxStatus>,
  dlqBefore: Map<number, bigint>,
  timeoutMs: number,
): Promise<ReplayOutcome[]> {
  const admin = await connectedAdmin(ctx);
  const names = ctx.topicNames();
  const group = ctx.consumerGroup();
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
    ctx,
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
        kafka: ctx.kafka(),
        admin,
        topic: names.dlq,
        ranges: grown.map((w) => ({ partition: w.partition, from: dlqSeen.get(w.partition) ?? 0n, to: BigInt(w.high) })),
        groupPrefix: 'bridge-cli-dlq',
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
      ctx,
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

export const dlqReplay: CommandSpec = {
  path: ['dlq', 'replay'],
  summary: 'republish dead-lettered records (original key, body and headers) to the events topic and report outcomes',
  usage: '(<event_id|partition:offset>... | --all [--reason R] [--since T]) [--no-wait] [--timeout-ms N]',
  details: [
    'Fix the cause first. Each selected record goes back to the events topic as the ingress produced it',
    '(plus a replayed-from header); an event dead-lettered several times is replayed once. Then it waits',
    "for each event's inbox status to settle (needs DATABASE_URL): applied, stale, duplicate, ... count",
    'as done; dead-lettered again, quarantined or no answer before the timeout count as failed (exit 1).',
    'Unknown ids fail the command before anything is sent.',
  ].join('\n'),
  examples: [
    'bridge dlq replay evt_0f3c2d evt_9a1b7e',
    'bridge dlq replay --all --reason retries_exhausted --dry-run',
    'bridge dlq replay 3:1042 --no-wait',
  ],
  options: {
    all: { type: 'boolean', description: 'every record (narrowed by --reason / --since)' },
    ...filterOptions,
    'no-wait': { type: 'boolean', description: 'do not wait for the outcomes' },
    'timeout-ms': { type: 'string', description: 'how long to wait for outcomes (default 60000)', valueName: 'N' },
  },
  positionals: true,
  mutating: true,
  async run(args, ctx) {
    const all = flag(args, 'all');
    if (all && args.positionals.length > 0) throw new UsageError('give either event ids or --all, not both');
    if (!all && args.positionals.length === 0) throw new UsageError('give event ids (or partition:offset) to replay, or --all');
    if (!all && (args.values.reason !== undefined || args.values.since !== undefined))
      throw new UsageError('--reason and --since go with --all');
    const filter = filterFrom(args);
    const timeoutText = stringOption(args, 'timeout-ms') ?? '60000';
    if (!/^\d+$/.test(timeoutText)) throw new UsageError('--timeout-ms must be an integer');
    const wait = !flag(args, 'no-wait');
    const dryRun = flag(args, 'dry-run');
    const events = ctx.topicNames().events;

    const { topic, entries } = await readDlq(ctx);
    let selected: DlqEntry[];
    if (all) {
      selected = filterEntries(entries, filter);
    } else {
      const refs = args.positionals.map((text) => ({ text, ref: parseDlqRef(text) }));
      const missing = refs.filter(({ ref }) => !entries.some((e) => matchesRef(e, ref))).map((r) => r.text);
      if (missing.length > 0) throw new CommandFailed(`not on ${topic}: ${missing.join(', ')}; nothing was replayed`, { missing });
      selected = entries.filter((e) => refs.some(({ ref }) => matchesRef(e, ref)));
    }
    const toReplay = latestPerEvent(selected);
    const plan = toReplay.map((e) => ({
      event_id: e.eventId,
      from: `${e.partition}:${e.offset}`,
      key: e.key?.toString('utf8') ?? null,
      reason: entryReason(e),
    }));
    if (dryRun || toReplay.length === 0) {
      ctx.out.result(
        { dry_run: dryRun, to: events, count: plan.length, records: plan },
        `${renderTable(
          ['from', 'event_id', 'key', 'reason'],
          plan.map((p) => [p.from, p.event_id, p.key, p.reason]),
        )}\n${plan.length} record(s) ${dryRun ? `would be replayed to ${events} (dry run: nothing sent)` : 'selected: nothing to replay'}`,
      );
      return;
    }

    const before = wait ? await inboxStatuses(ctx, toReplay) : new Map<string, InboxStatus>();
    const dlqBefore = wait
      ? new Map(
          (await connectedAdmin(ctx).then((a) => a.fetchTopicOffsets(ctx.topicNames().dlq))).map((w) => [w.partition, BigInt(w.high)]),
        )
      : new Map<number, bigint>();
    const admin = await connectedAdmin(ctx);
    const producer = createRecoveringProducer(ctx.kafka(), { name: 'dlq-replay', logger: ctx.logger, connectTimeoutMs: 10_000 });
    ctx.onClose(() => producer.close());
    await producer.connect();
    const messages: Message[] = toReplay.map((e) => replayMessage(e, topic));
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
    ctx.out.note(
      `replayed ${sent.length} record(s) to ${events}${notSent.length > 0 ? `; ${notSent.length} could not be sent` : ''}${wait && sent.length > 0 ? '; waiting for outcomes' : ''}`,
    );

    const settled: ReplayOutcome[] = wait
      ? await waitForOutcomes(ctx, sent, before, dlqBefore, Number(timeoutText))
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
    const outcomes = toReplay.map((e) => byFrom.get(`${e.partition}:${e.offset}`)!);
    const failed = outcomes.filter((o) => !o.ok).length;
    const counts: Record<string, number> = {};
    for (const o of outcomes) counts[o.status] = (counts[o.status] ?? 0) + 1;
    ctx.out.result(
      { to: events, count: outcomes.length, failed, counts, outcomes },
      `${renderTable(
        ['from', 'event_id', 'outcome', 'detail'],
        outcomes.map((o) => [o.from, o.event_id, o.status, o.detail]),
      )}\n${outcomes.length} replayed: ${Object.entries(counts)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
    return failed > 0 ? 1 : 0;
  },
};
