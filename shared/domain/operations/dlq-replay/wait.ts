import { createHash } from 'node:crypto';
import { tenantScopedKey } from '#domain/apply/index.ts';
import { eventFingerprint, parseEvent } from '#domain/contract/index.ts';
import { selectInboxPayloads } from '#domain/store/inbox.ts';
import type { Queryable } from '#domain/store/session.ts';
import { headerText } from '#plumbing/kafka/headers.ts';
import { readRange } from '#plumbing/kafka/topic-reader.ts';
import { entryReason, inboxKeyOf, REPLAYED_FROM_HEADER, toDlqEntry, type DlqEntry } from '../dlq-records.ts';
import { inboxStatuses, SETTLED_OK, statusOf, type InboxStatus } from './inbox.ts';
import type { DlqClients, ReplayOutcome, SentRecord } from './types.ts';

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
export async function waitForOutcomes(
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
