import { withTransaction } from '../db/transaction.ts';
import type { Pool, PoolClient } from 'pg';
import { eventAction, parseEvent, resourceKey } from '../contract/index.ts';
import { BridgeError } from '../errors/bridge-error.ts';
import { appliedHeaders, buildAppliedRecord } from './applied-record.ts';
import { decideOutcomes, idempotencyIndexKey, type Decision, type KnownInboxRow, type KnownState } from './decide.ts';
import { BEGIN_APPLY_TRANSACTION, LOCK_RESOURCE_KEYS, READ_CHUNK_CONTEXT, WRITE_CHUNK_EFFECTS } from './sql.ts';
import type { ApplyResult, ParsedEvent, RecordHeaderValue, SourceRecord } from './types.ts';

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
    await client.query(LOCK_RESOURCE_KEYS, [keys]);

    const eventIds = [...new Set(events.map((e) => e.envelope.event_id))];
    const withKeys = events.filter((e) => e.envelope.idempotency_key !== undefined);
    const resources = [...new Map(events.map((e) => [e.resourceKey, e.envelope])).values()];
    const context = await client.query<{ kind: string; a: string; b: string; c: string; version: string | null; deleted: boolean | null }>(
      READ_CHUNK_CONTEXT,
      [
        eventIds,
        withKeys.map((e) => e.envelope.tenant_id),
        withKeys.map((e) => e.envelope.idempotency_key),
        resources.map((e) => e.tenant_id),
        resources.map((e) => e.resource.type),
        resources.map((e) => e.resource.id),
      ],
    );
    const inbox = new Map<string, KnownInboxRow>();
    const idempotency = new Map<string, string>();
    const states = new Map<string, KnownState>();
    for (const r of context.rows) {
      if (r.kind === 'inbox') inbox.set(r.a, { bodySha256: r.b, status: r.c });
      else if (r.kind === 'idem') idempotency.set(idempotencyIndexKey(r.a, r.b), r.c);
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
    const inboxJson = inboxRows.map((d) => ({
      event_id: env(d).event_id,
      idempotency_key: env(d).idempotency_key ?? null,
      duplicate_of: d.duplicateOf ?? null,
      tenant_id: env(d).tenant_id,
      resource_type: env(d).resource.type,
      resource_id: env(d).resource.id,
      resource_version: env(d).resource.version,
      event_type: env(d).event_type,
      status: d.outcome,
      reason: d.reason ?? null,
      body_sha256: d.event.bodySha256,
      payload: d.event.payload,
      source_topic: d.event.record.topic,
      source_partition: d.event.record.partition,
      source_offset: d.event.record.offset,
      occurred_at: env(d).occurred_at,
      received_at: receivedAt(d.event.record),
    }));
    const stateJson = stateRows.map((d) => ({
      tenant_id: env(d).tenant_id,
      resource_type: env(d).resource.type,
      resource_id: env(d).resource.id,
      version: env(d).resource.version,
      deleted: d.event.action === 'delete',
      data: d.event.action === 'delete' ? null : (env(d).data ?? {}),
      last_event_id: env(d).event_id,
    }));
    const outboxJson = outboxRows.map((d, n) => ({
      n,
      event_id: env(d).event_id,
      key: d.event.resourceKey,
      // Serialised once here; the relay publishes these exact bytes, so any republish is identical.
      payload: JSON.stringify(buildAppliedRecord(d.event, appliedAt)),
      headers: appliedHeaders(d.event),
    }));
    const anomalyJson = anomalyRows.map((d) => ({
      event_id: env(d).event_id,
      body_sha256: d.event.bodySha256,
      original_body_sha256: d.originalBodySha256 ?? null,
      payload: d.event.payload,
      tenant_id: env(d).tenant_id,
      resource_type: env(d).resource.type,
      resource_id: env(d).resource.id,
      resource_version: env(d).resource.version,
      source_topic: d.event.record.topic,
      source_partition: d.event.record.partition,
      source_offset: d.event.record.offset,
    }));

    const written = await client.query<{ inbox_rows: number; state_rows: number }>(WRITE_CHUNK_EFFECTS, [
      JSON.stringify(inboxJson),
      JSON.stringify(stateJson),
      JSON.stringify(outboxJson),
      JSON.stringify(anomalyJson),
    ]);
    const counts = written.rows[0]!;
    if (counts.inbox_rows !== inboxRows.length) throw concurrentChange('inbox_events');
    if (counts.state_rows !== stateRows.length) throw concurrentChange('resource_state');
    return decisions;
  }
}

function headerString(value: RecordHeaderValue): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined ? undefined : first.toString();
}

function receivedAt(record: SourceRecord): string | null {
  const header = headerString(record.headers?.['received-at']);
  if (header !== undefined) {
    const asNumber = Number(header);
    const date = Number.isFinite(asNumber) && /^\d+$/.test(header) ? new Date(asNumber) : new Date(header);
    if (!Number.isNaN(date.getTime())) return date.toISOString();
  }
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
      payload: (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes)).toString('utf8'),
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
