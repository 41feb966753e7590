import { withTransaction } from '#plumbing/db/transaction.ts';
import type { Pool, PoolClient } from 'pg';
import { eventAction, parseEvent, resourceKey } from '#domain/contract/index.ts';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import { serializeAppliedRecord } from './applied-record.ts';
import { decideOutcomes, tenantScopedKey, type Decision, type KnownInboxRow, type KnownState } from './decide.ts';
import { booleanArray, integerArray, PackedBytes, textArray } from './pg-params.ts';
import { BEGIN_APPLY_TRANSACTION, LOCK_RESOURCE_KEYS, READ_CHUNK_CONTEXT, WRITE_CHUNK_EFFECTS } from './sql.ts';
import { deliveryAttemptOf } from './source-record.ts';
import { receivedAtHeader } from '#domain/contract/event-headers.ts';
import type { ApplyResult, ParsedEvent, SourceRecord } from './types.ts';

export interface SnapshotApplierOptions {
  pool: Pool;
  clock?: () => Date;
  /** Called after COMMIT, before applyBatch returns (test-only fault injection hooks in here). */
  afterCommit?: (results: ApplyResult[]) => void;
}

type Parsed = { ok: true; event: ParsedEvent } | { ok: false; result: ApplyResult };

/**
 * The one apply path: the worker, the retry consumers and the CLI's reprocess all feed raw
 * records through it. Safe to feed the same record any number of times (idempotent and
 * version-checked), from any number of processes at once (per-key advisory locks).
 */
export class SnapshotApplier {
  readonly #pool: Pool;
  readonly #clock: () => Date;
  readonly #afterCommit: ((results: ApplyResult[]) => void) | undefined;

  constructor(options: SnapshotApplierOptions) {
    this.#pool = options.pool;
    this.#clock = options.clock ?? (() => new Date());
    this.#afterCommit = options.afterCommit;
  }

  /** Applies one record in its own transaction. */
  async apply(record: SourceRecord): Promise<ApplyResult> {
    const [result] = await this.applyBatch([record]);
    return result!;
  }

  /**
   * Applies the records in one transaction, in array order (keep a key's records in offset order).
   * Returns one result per record, same order. Throws when the transaction fails: then nothing
   * of the batch was applied. `invalid` records write nothing.
   */
  async applyBatch(records: readonly SourceRecord[]): Promise<ApplyResult[]> {
    const parsed = records.map(parseRecord);
    const events = parsed.flatMap((p) => (p.ok ? [p.event] : []));
    const decided = new Map<ParsedEvent, Decision>();
    if (events.length > 0) {
      const decisions = await withTransaction(this.#pool, (client) => this.#applyInTransaction(client, events), BEGIN_APPLY_TRANSACTION);
      for (const d of decisions) decided.set(d.event, d);
    }
    const results = parsed.map((p) => (p.ok ? toResult(decided.get(p.event)!) : p.result));
    this.#afterCommit?.(results);
    return results;
  }

  async #applyInTransaction(client: PoolClient, events: ParsedEvent[]): Promise<Decision[]> {
    const keys = [...new Set(events.map((e) => e.resourceKey))];
    // Locked first, read after: the reads then see every commit made under these keys.
    await client.query(LOCK_RESOURCE_KEYS, [textArray(keys)]);

    const eventIds = [...new Map(events.map((e) => [tenantScopedKey(e.envelope.tenant_id, e.envelope.event_id), e.envelope])).values()];
    const withKeys = events.filter((e) => e.envelope.idempotency_key !== undefined);
    const resources = [...new Map(events.map((e) => [e.resourceKey, e.envelope])).values()];
    const context = await client.query<ChunkContextRow>(
      READ_CHUNK_CONTEXT,
      [
        textArray(eventIds.map((e) => e.tenant_id)),
        textArray(eventIds.map((e) => e.event_id)),
        textArray(withKeys.map((e) => e.envelope.tenant_id)),
        textArray(withKeys.map((e) => e.envelope.idempotency_key)),
        textArray(resources.map((e) => e.tenant_id)),
        textArray(resources.map((e) => e.resource.type)),
        textArray(resources.map((e) => e.resource.id)),
      ],
    );
    const inbox = new Map<string, KnownInboxRow>();
    const idempotency = new Map<string, string>();
    const states = new Map<string, KnownState>();
    for (const r of context.rows) {
      if (r.kind === 'inbox') {
        const pruned = r.version === '1';
        inbox.set(tenantScopedKey(r.a, r.b), { bodySha256: r.d!, status: r.c, ...(pruned ? { fingerprint: r.e ?? undefined } : { payload: r.e! }) });
      }
      else if (r.kind === 'idem') idempotency.set(tenantScopedKey(r.a, r.b), r.c);
      else {
        const key = resourceKey({ tenant_id: r.a, resource: { type: r.b, id: r.c, version: 0 } });
        states.set(key, { version: Number(r.version), deleted: r.deleted === true });
      }
    }

    const decisions = decideOutcomes(events, inbox, idempotency, states);
    const inboxRows = decisions.filter((d) => d.writeInbox);
    // Only the last applied version of each resource in the chunk reaches the table.
    const lastApplied = new Map<string, Decision>();
    for (const d of decisions) if (d.outcome === 'applied') lastApplied.set(d.event.resourceKey, d);
    const stateRows = [...lastApplied.values()];
    const outboxRows = decisions.filter((d) => d.outcome === 'applied');
    const anomalyRows = decisions.filter((d) => d.outcome === 'quarantined');
    const appliedAt = this.#clock();
    const env = (d: Decision) => d.event.envelope;
    const appliedAtIso = appliedAt.toISOString();
    // Each applied snapshot is serialised once: the state row and the applied record share it.
    const dataJson = new Map<Decision, string | null>();
    for (const d of outboxRows) dataJson.set(d, d.event.action === 'delete' ? null : JSON.stringify(env(d).data ?? {}));

    const inboxPayloads = new PackedBytes();
    for (const d of inboxRows) inboxPayloads.add(d.event.bytes);
    const stateData = new PackedBytes();
    for (const d of stateRows) stateData.add(dataJson.get(d)!);
    const outboxPayloads = new PackedBytes();
    // Serialised once here; the relay publishes these exact bytes, so any republish is identical.
    for (const d of outboxRows) outboxPayloads.add(serializeAppliedRecord(d.event, appliedAtIso, dataJson.get(d)!));

    const anomalyJson = anomalyRows.map((d) => ({
      event_id: env(d).event_id,
      body_sha256: d.event.bodySha256,
      payload: d.event.bytes.toString('utf8'),
      tenant_id: env(d).tenant_id,
      resource_type: env(d).resource.type,
      resource_id: env(d).resource.id,
      resource_version: env(d).resource.version,
      source_topic: d.event.record.topic,
      source_partition: d.event.record.partition,
      source_offset: d.event.record.offset,
    }));
    const text = (rows: Decision[], f: (d: Decision) => string | null | undefined) => textArray(rows.map(f));
    const ints = (rows: Decision[], f: (d: Decision) => number | string) => integerArray(rows.map(f));
    const written = await client.query<{ inbox_rows: number; state_rows: number }>(WRITE_CHUNK_EFFECTS, [
      text(inboxRows, (d) => env(d).event_id),
      text(inboxRows, (d) => env(d).idempotency_key),
      text(inboxRows, (d) => d.duplicateOf),
      text(inboxRows, (d) => env(d).tenant_id),
      text(inboxRows, (d) => env(d).resource.type),
      text(inboxRows, (d) => env(d).resource.id),
      ints(inboxRows, (d) => env(d).resource.version),
      text(inboxRows, (d) => env(d).event_type),
      text(inboxRows, (d) => d.outcome),
      text(inboxRows, (d) => d.reason),
      text(inboxRows, (d) => d.event.bodySha256),
      text(inboxRows, (d) => d.event.record.topic),
      ints(inboxRows, (d) => d.event.record.partition),
      ints(inboxRows, (d) => d.event.record.offset),
      text(inboxRows, (d) => env(d).occurred_at),
      text(inboxRows, (d) => receivedAt(d.event.record)),
      ...inboxPayloads.params(),
      text(stateRows, (d) => env(d).tenant_id),
      text(stateRows, (d) => env(d).resource.type),
      text(stateRows, (d) => env(d).resource.id),
      ints(stateRows, (d) => env(d).resource.version),
      booleanArray(stateRows.map((d) => d.event.action === 'delete')),
      text(stateRows, (d) => env(d).event_id),
      ...stateData.params(),
      text(outboxRows, (d) => env(d).event_id),
      text(outboxRows, (d) => d.event.resourceKey),
      text(outboxRows, (d) => d.event.record.topic),
      ints(outboxRows, (d) => d.event.record.partition),
      ints(outboxRows, (d) => d.event.record.offset),
      ...outboxPayloads.params(),
      JSON.stringify(anomalyJson),
      // 'NULL' is the array literal's null element: most deliveries carry no attempt number.
      ints(inboxRows, (d) => d.event.deliveryAttempt ?? 'NULL'),
    ]);
    const counts = written.rows[0]!;
    if (counts.inbox_rows !== inboxRows.length) throw concurrentChange('inbox_events');
    if (counts.state_rows !== stateRows.length) throw concurrentChange('resource_state');
    return decisions;
  }
}

interface ChunkContextRow {
  kind: 'inbox' | 'idem' | 'state';
  a: string;
  b: string;
  c: string;
  d: string | null;
  e: string | null;
  version: string | null;
  deleted: boolean | null;
}

function receivedAt(record: SourceRecord): string | null {
  const header = receivedAtHeader(record.headers);
  if (header !== undefined) return header.toISOString();
  if (record.timestamp !== undefined && /^\d+$/.test(record.timestamp)) return new Date(Number(record.timestamp)).toISOString();
  return null;
}

function parseRecord(record: SourceRecord): Parsed {
  const bytes = record.value ?? Buffer.alloc(0);
  const result = parseEvent(bytes);
  if (!result.ok) {
    return {
      ok: false,
      result: {
        record,
        outcome: 'invalid',
        bodySha256: result.bodySha256,
        reason: result.code,
        error: new BridgeError(result.code, result.message, { retryable: false }),
      },
    };
  }
  const envelope = result.envelope;
  return {
    ok: true,
    event: {
      record,
      envelope,
      bodySha256: result.bodySha256,
      bytes: Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes),
      deliveryAttempt: deliveryAttemptOf(record, envelope),
      resourceKey: resourceKey(envelope),
      action: eventAction(envelope),
    },
  };
}

function toResult(d: Decision): ApplyResult {
  const { envelope } = d.event;
  return {
    record: d.event.record,
    outcome: d.outcome,
    bodySha256: d.event.bodySha256,
    eventId: envelope.event_id,
    resourceKey: d.event.resourceKey,
    version: envelope.resource.version,
    action: d.event.action,
    storedVersion: d.storedVersion,
    versionGap: d.versionGap,
    ...(d.reason === undefined ? {} : { reason: d.reason }),
  };
}

function concurrentChange(what: string): BridgeError {
  // Only reachable when something outside the per-key lock changed the rows; retrying is correct.
  return new BridgeError('apply_conflict', `${what} changed concurrently; the batch was rolled back`, { retryable: true });
}
