import { withTransaction } from '#plumbing/db/transaction.ts';
import type { Pool, PoolClient } from 'pg';
import { eventAction, parseEvent, resourceKey } from '#domain/contract/index.ts';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import { endSpanWithError, SpanKind, TRACING_OFF, type Span, type TraceHeaders, type Tracing } from '#plumbing/observability/tracing.ts';
import { chunkRows } from './chunk-rows.ts';
import { decideOutcomes, tenantScopedKey, type Decision, type KnownInboxRow, type KnownState } from './decide.ts';
import { beginApplyAndLock, readChunkContext, writeChunkEffects } from '#domain/store/chunk.ts';
import { deliveryAttemptOf } from './source-record.ts';
import { futureOccurredAtFailure } from './future-occurred-at.ts';
import { occurredAtMicros } from '#domain/contract/occurred-at.ts';
import { eventOrdering, traceContextHeaders } from '#domain/contract/event-headers.ts';
import type { ApplyResult, ParsedEvent, SourceRecord } from './types.ts';

export interface SnapshotApplierOptions {
  pool: Pool;
  clock?: () => Date;
  /** Called after COMMIT, before applyBatch returns (test-only fault injection hooks in here). */
  afterCommit?: (results: ApplyResult[]) => void;
  /** When enabled: a consumer span per record, continuing its traceparent; the outbox row carries it on. */
  tracing?: Tracing;
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
  readonly #tracing: Tracing;

  constructor(options: SnapshotApplierOptions) {
    this.#pool = options.pool;
    this.#clock = options.clock ?? (() => new Date());
    this.#afterCommit = options.afterCommit;
    this.#tracing = options.tracing ?? TRACING_OFF;
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
    if (this.#tracing.enabled) return this.#applyBatchTraced(records);
    return this.#applyBatch(records, undefined);
  }

  async #applyBatch(records: readonly SourceRecord[], traces: Map<SourceRecord, TraceHeaders> | undefined): Promise<ApplyResult[]> {
    const parsed = records.map(parseRecord);
    const events = parsed.flatMap((p) => (p.ok ? [p.event] : []));
    const decided = new Map<ParsedEvent, Decision>();
    if (events.length > 0) {
      // Locked first (with BEGIN), read after: the reads then see every commit made under these keys.
      const keys = [...new Set(events.map((e) => e.resourceKey))];
      const decisions = await withTransaction(
        this.#pool,
        (client) => this.#applyInTransaction(client, events, traces),
        beginApplyAndLock(keys),
      );
      for (const d of decisions) decided.set(d.event, d);
    }
    const results = parsed.map((p) => (p.ok ? toResult(decided.get(p.event)!) : p.result));
    this.#afterCommit?.(results);
    return results;
  }

  /**
   * A consumer span per record, child of the context its headers carry (the ingress's publish
   * span), all spanning the one chunk transaction. Per record rather than one chunk span with
   * links: each event's trace then runs unbroken from the POST to the applied record (a link is
   * only a pointer to another trace in most trace views), and with a parent-based sampler an
   * unsampled record costs a non-recording span. The applied record's outbox row keeps the span's
   * context, so the relay and downstream consumers continue the same trace.
   */
  async #applyBatchTraced(records: readonly SourceRecord[]): Promise<ApplyResult[]> {
    const tracing = this.#tracing;
    const spans = new Map<SourceRecord, Span>();
    const traces = new Map<SourceRecord, TraceHeaders>();
    for (const record of records) {
      const span = tracing.startSpan(
        `process ${record.topic}`,
        {
          kind: SpanKind.CONSUMER,
          attributes: {
            'messaging.system': 'kafka',
            'messaging.operation.type': 'process',
            'messaging.destination.name': record.topic,
            'messaging.destination.partition.id': String(record.partition),
            'messaging.kafka.offset': Number(record.offset),
          },
        },
        tracing.extract(traceContextHeaders(record.headers)),
      );
      spans.set(record, span);
      traces.set(record, tracing.inject(span));
    }
    let results: ApplyResult[];
    try {
      results = await this.#applyBatch(records, traces);
    } catch (error) {
      for (const span of spans.values()) endSpanWithError(span, error);
      throw error;
    }
    for (const result of results) {
      const span = spans.get(result.record)!;
      span.setAttribute('bridge.apply.outcome', result.outcome);
      if (result.eventId !== undefined) span.setAttribute('bridge.event_id', result.eventId);
      if (result.resourceKey !== undefined) span.setAttribute('bridge.resource_key', result.resourceKey);
      if (result.reason !== undefined) span.setAttribute('bridge.reason', result.reason);
      span.end();
      result.traceId = span.spanContext().traceId;
    }
    return results;
  }

  async #applyInTransaction(
    client: PoolClient,
    events: ParsedEvent[],
    traces: Map<SourceRecord, TraceHeaders> | undefined,
  ): Promise<Decision[]> {
    const eventIds = [...new Map(events.map((e) => [tenantScopedKey(e.envelope.tenant_id, e.envelope.event_id), e.envelope])).values()];
    const withKeys = events.filter((e) => e.envelope.idempotency_key !== undefined);
    const resources = [...new Map(events.map((e) => [e.resourceKey, e.envelope])).values()];
    const context = await readChunkContext(client, {
      events: eventIds.map((e) => ({ tenant_id: e.tenant_id, event_id: e.event_id })),
      idempotencyKeys: withKeys.map((e) => ({ tenant_id: e.envelope.tenant_id, idempotency_key: e.envelope.idempotency_key! })),
      resources: resources.map((e) => ({ tenant_id: e.tenant_id, resource_type: e.resource.type, resource_id: e.resource.id })),
    });
    const inbox = new Map<string, KnownInboxRow>();
    const idempotency = new Map<string, string>();
    const states = new Map<string, KnownState>();
    for (const r of context) {
      if (r.kind === 'inbox') {
        // A null payload was pruned by retention, which kept the fingerprint (if the body parsed).
        const known = r.payload === null ? { fingerprint: r.fingerprint ?? undefined } : { payload: r.payload };
        inbox.set(tenantScopedKey(r.tenant_id, r.event_id), { bodySha256: r.body_sha256, status: r.status, ...known });
      } else if (r.kind === 'idem') idempotency.set(tenantScopedKey(r.tenant_id, r.idempotency_key), r.event_id);
      else {
        const key = resourceKey({ tenant_id: r.tenant_id, resource: { type: r.resource_type, id: r.resource_id, version: 0 } });
        states.set(key, {
          version: r.version === null ? null : Number(r.version),
          deleted: r.deleted === true,
          occurredAtMicros: r.last_occurred_us === null ? null : BigInt(r.last_occurred_us),
          orderedBy: r.ordered_by,
        });
      }
    }

    const decisions = decideOutcomes(events, inbox, idempotency, states);
    const rows = chunkRows(decisions, { appliedAtIso: this.#clock().toISOString(), traces });
    const counts = await writeChunkEffects(client, rows);
    if (counts.inbox_rows !== rows.inbox.length) throw concurrentChange('inbox_events');
    if (counts.state_rows !== rows.state.length) throw concurrentChange('resource_state');
    return decisions;
  }
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
  // Dated too far ahead of its arrival: dead-lettered (as `invalid` records are), never applied.
  const future = futureOccurredAtFailure(record, envelope);
  if (future !== undefined) {
    return {
      ok: false,
      result: { record, outcome: 'invalid', bodySha256: result.bodySha256, eventId: envelope.event_id, reason: future.code, error: future },
    };
  }
  const orderedBy = eventOrdering(record.headers, envelope);
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
      orderedBy,
      ...(orderedBy === 'occurred_at' ? { occurredAtMicros: occurredAtMicros(envelope.occurred_at) } : {}),
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
    resource: { tenantId: envelope.tenant_id, type: envelope.resource.type, id: envelope.resource.id },
    ...(envelope.resource.version === undefined ? {} : { version: envelope.resource.version }),
    eventType: envelope.event_type,
    action: d.event.action,
    orderedBy: d.event.orderedBy,
    // Reconciliation's triggers (unseen, gap) read versions: an event ordered by time reports none.
    ...(d.event.orderedBy === 'version' ? { storedVersion: d.storedVersion } : {}),
    versionGap: d.versionGap,
    ...(d.reason === undefined ? {} : { reason: d.reason }),
  };
}

function concurrentChange(what: string): BridgeError {
  // Only reachable when something outside the per-key lock changed the rows; retrying is correct.
  return new BridgeError('apply_conflict', `${what} changed concurrently; the batch was rolled back`, { retryable: true });
}
