// Reading a part of the DLQ, never all of it: the console's dead-letter pages. A page is the newest
// records of a time window (offsets found from timestamps by the broker's time index), read backwards
// from the window's end in growing steps until a page of matches is found or a scan budget is spent;
// a cursor (an exclusive end offset per partition) continues with older records. Cost is bounded by
// the budget, whatever the DLQ's size. Record timestamps are the producer's (the dead-lettering
// worker's clock); the time filter on `dlq-dead-lettered-at` is applied exactly to what is read.
import { readRange, type PartitionRange } from '#plumbing/kafka/topic-reader.ts';
import { TOPIC_RESOURCE_TYPE } from '#plumbing/kafka/topics.ts';
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import { deadLetteredAt, toDlqEntry, type DlqEntry } from './dlq-records.ts';

export type DlqCursor = Map<number, bigint>;

/** Per partition and fetch: a page reads a few records, not a megabyte from each partition. */
const FETCH_BYTES = 32 * 1024;

export interface DlqWindowQuery {
  /** ms since the epoch, inclusive. */
  since?: number | undefined;
  until?: number | undefined;
  /** Continue below these offsets (exclusive), per partition: the `next` of a previous page. */
  before?: DlqCursor | undefined;
  match?: (entry: DlqEntry) => boolean;
  /** Matches per page. */
  limit: number;
  /** Records read at most for one page. */
  scanBudget: number;
}

export interface DlqWindow {
  /** Newest first, at most `limit`. */
  entries: DlqEntry[];
  /** Records on the topic now. */
  total: number;
  /** Records in [since, until] (by record timestamp), before any cursor. */
  inWindow: number;
  /** Records read for this page. */
  scanned: number;
  /** Where the next (older) page starts; undefined when the window has nothing older. */
  next: DlqCursor | undefined;
}

export interface DlqReadClients {
  kafka: Kafka;
  admin: Admin;
  topic: string;
  groupPrefix?: string;
}

export function formatCursor(cursor: DlqCursor): string {
  return [...cursor].map(([p, o]) => `${p}:${o}`).join(',');
}

/** Undefined for an unreadable cursor. */
export function parseCursor(text: string): DlqCursor | undefined {
  const cursor: DlqCursor = new Map();
  for (const part of text.split(',')) {
    const m = /^(\d{1,6}):(\d{1,19})$/.exec(part.trim());
    if (!m) return undefined;
    cursor.set(Number(m[1]), BigInt(m[2]!));
  }
  return cursor;
}

async function offsetsAt(admin: Admin, topic: string, ms: number): Promise<Map<number, bigint>> {
  return new Map((await admin.fetchTopicOffsetsByTimestamp(topic, ms)).map((o) => [o.partition, BigInt(o.offset)]));
}

/** Per partition [from, to) of the records whose timestamps fall in [since, until]. */
export async function windowRanges(
  admin: Admin,
  topic: string,
  window: { since?: number | undefined; until?: number | undefined },
): Promise<{ ranges: PartitionRange[]; total: number }> {
  const watermarks = await admin.fetchTopicOffsets(topic);
  const total = watermarks.reduce((n, w) => n + Number(BigInt(w.high) - BigInt(w.low)), 0);
  const starts = window.since === undefined ? undefined : await offsetsAt(admin, topic, window.since);
  const ends = window.until === undefined ? undefined : await offsetsAt(admin, topic, window.until + 1);
  const ranges = watermarks.map((w) => {
    const low = BigInt(w.low);
    const high = BigInt(w.high);
    const from = starts?.get(w.partition) ?? low;
    const to = ends?.get(w.partition) ?? high;
    return { partition: w.partition, from: from < low ? low : from, to: to > high ? high : to };
  });
  return { ranges, total };
}

/** Exactly these records (partition:offset), read in runs of nearby offsets. */
export async function readDlqRecords(clients: DlqReadClients, refs: Array<{ partition: number; offset: bigint }>): Promise<DlqEntry[]> {
  const byPartition = new Map<number, bigint[]>();
  for (const r of refs) byPartition.set(r.partition, [...(byPartition.get(r.partition) ?? []), r.offset]);
  const watermarks = new Map((await clients.admin.fetchTopicOffsets(clients.topic)).map((w) => [w.partition, w]));
  // Runs of offsets at most GAP apart, one range each: a selection is never widened into a scan.
  const GAP = 256n;
  const runs: PartitionRange[][] = [];
  for (const [partition, offsets] of byPartition) {
    const w = watermarks.get(partition);
    if (!w) continue;
    const sorted = [...new Set(offsets)].filter((o) => o >= BigInt(w.low) && o < BigInt(w.high)).sort((a, b) => (a < b ? -1 : 1));
    let i = 0;
    for (let start = 0; start < sorted.length;) {
      let end = start;
      while (end + 1 < sorted.length && sorted[end + 1]! - sorted[end]! <= GAP) end += 1;
      (runs[i++] ??= []).push({ partition, from: sorted[start]!, to: sorted[end]! + 1n });
      start = end + 1;
    }
  }
  const wanted = new Set(refs.map((r) => `${r.partition}:${r.offset}`));
  const out: DlqEntry[] = [];
  // One read per round, each round at most one range per partition (readRange's shape).
  for (const ranges of runs) {
    await readRange({
      kafka: clients.kafka,
      admin: clients.admin,
      topic: clients.topic,
      ranges,
      groupPrefix: clients.groupPrefix ?? 'bridge-dlq-records',
      maxBytesPerPartition: FETCH_BYTES,
      onRecords: async (records) => {
        for (const r of records) if (wanted.has(`${r.partition}:${r.message.offset}`)) out.push(toDlqEntry(r.partition, r.message));
      },
    });
  }
  return out;
}

const newestFirst = (a: DlqEntry, b: DlqEntry) =>
  deadLetteredAt(b) - deadLetteredAt(a) || b.partition - a.partition || Number(BigInt(b.offset) - BigInt(a.offset));

/** A page of the window's newest matching records, and where the next page starts. */
export async function readDlqWindow(clients: DlqReadClients, query: DlqWindowQuery): Promise<DlqWindow> {
  const { ranges, total } = await windowRanges(clients.admin, clients.topic, query);
  const inWindow = ranges.reduce((n, r) => n + Number(r.to > r.from ? r.to - r.from : 0n), 0);
  // `to` moves down as records are read; `from` stays.
  const left = new Map(
    ranges.map((r) => {
      const before = query.before?.get(r.partition);
      const to = before !== undefined && before < r.to ? before : r.to;
      return [r.partition, { partition: r.partition, from: r.from, to }];
    }),
  );
  const matched = new Map<number, DlqEntry[]>();
  let scanned = 0;
  let found = 0;
  let step = BigInt(Math.max(16, Math.ceil(query.limit / Math.max(1, left.size))));
  const inTime = (e: DlqEntry) =>
    (query.since === undefined || deadLetteredAt(e) >= query.since) && (query.until === undefined || deadLetteredAt(e) <= query.until);
  while (found < query.limit && scanned < query.scanBudget) {
    const perPartition = BigInt(Math.max(1, Math.floor((query.scanBudget - scanned) / Math.max(1, left.size))));
    const take = step < perPartition ? step : perPartition;
    const chunk = [...left.values()]
      .filter((r) => r.to > r.from)
      .map((r) => ({ partition: r.partition, from: r.to - take > r.from ? r.to - take : r.from, to: r.to }));
    if (chunk.length === 0) break;
    await readRange({
      kafka: clients.kafka,
      admin: clients.admin,
      topic: clients.topic,
      ranges: chunk,
      groupPrefix: clients.groupPrefix ?? 'bridge-dlq-window',
      maxBytesPerPartition: FETCH_BYTES,
      onRecords: async (records) => {
        for (const r of records) {
          scanned += 1;
          const entry = toDlqEntry(r.partition, r.message);
          if (!inTime(entry) || (query.match && !query.match(entry))) continue;
          const list = matched.get(r.partition) ?? [];
          list.push(entry);
          matched.set(r.partition, list);
          found += 1;
        }
      },
    });
    for (const c of chunk) left.get(c.partition)!.to = c.from;
    step *= 4n;
  }
  const all = [...matched.values()].flat().sort(newestFirst);
  const shown = all.slice(0, query.limit);
  const unshown = all.slice(query.limit);
  // Each partition continues below what was read, or just above its newest match not shown.
  const next: DlqCursor = new Map();
  for (const r of left.values()) next.set(r.partition, r.to);
  for (const e of unshown) {
    const at = BigInt(e.offset) + 1n;
    if (at > next.get(e.partition)!) next.set(e.partition, at);
  }
  const more = [...left.values()].some((r) => next.get(r.partition)! > r.from);
  return { entries: shown, total, inWindow, scanned, next: more ? next : undefined };
}

export interface DlqExpiry {
  /** The topic's retention.ms; undefined when records never expire (-1). */
  retentionMs: number | undefined;
  warnMs: number;
  /** Records old enough to be deleted within warnMs (or already due: deletion is by whole segment). */
  expiring: number;
  /** Records written before this time are those (ms since the epoch). */
  writtenBefore: number | undefined;
}

/**
 * How many dead letters the broker may delete soon: those written more than retention - warnMs ago.
 * A dead letter past retention is gone and can no longer be replayed. From the time index only: no
 * record is read.
 */
export async function dlqExpiry(admin: Admin, topic: string, warnMs: number, now = Date.now()): Promise<DlqExpiry> {
  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: TOPIC_RESOURCE_TYPE, name: topic, configNames: ['retention.ms'] }],
  });
  const value = described.resources[0]?.configEntries.find((c) => c.configName === 'retention.ms')?.configValue;
  const retentionMs = value === undefined || Number(value) < 0 ? undefined : Number(value);
  if (retentionMs === undefined) return { retentionMs, warnMs, expiring: 0, writtenBefore: undefined };
  const writtenBefore = now - retentionMs + warnMs;
  const [watermarks, below] = await Promise.all([admin.fetchTopicOffsets(topic), offsetsAt(admin, topic, writtenBefore)]);
  const expiring = watermarks.reduce((n, w) => {
    const end = below.get(w.partition) ?? BigInt(w.low);
    return n + Number(end > BigInt(w.low) ? end - BigInt(w.low) : 0n);
  }, 0);
  return { retentionMs, warnMs, expiring, writtenBefore };
}
