import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import {
  eventAction,
  KEY_SEGMENT_PATTERN,
  parseEvent,
  RESOURCE_TYPE_PATTERN,
  resourceKey,
  type EventEnvelope,
} from '#domain/contract/index.ts';
import { encodeEventHeaders, RECONCILE_SOURCE } from '#domain/contract/event-headers.ts';
import { DEFAULT_MAX_FUTURE_SKEW_SECONDS, describeFutureOccurredAt, occurredAtTooFarAhead } from '#domain/contract/occurred-at-bound.ts';
import { occurredAtSchema } from '#domain/contract/envelope.ts';
import { formatMicros, occurredAtMicros } from '#domain/contract/occurred-at.ts';
import { DEFAULT_MAX_VERSION_LEAD, orderingOf, type ReconcileSource, type ResourceOrdering } from '#domain/sources/index.ts';
import { selectResourceState } from '#domain/store/state.ts';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import { CircuitBreaker } from './circuit-breaker.ts';
import { fetchSnapshot, type ProviderAnswer, type StatedIdentity } from './provider-client.ts';
import { TokenBucket } from './token-bucket.ts';

export const RECONCILE_TRIGGERS = ['gap', 'unseen', 'quarantine', 'operator'] as const;
export type ReconcileTrigger = (typeof RECONCILE_TRIGGERS)[number];

/**
 * applied: the API's snapshot (or, for a 404/410 whose body states the deletion's version, a
 * tombstone at that version) went to the events topic, carrying the provider's own version;
 * stale: the provider's version is not above the stored one, nothing sent; gone: a 404 or 410
 * without a version: evidence for an operator, nothing sent (a delete at a version the bridge
 * made up would drop the provider's next real update); failed: transient failures on every
 * attempt, or a refused answer; circuit_open: the source's breaker refused the request; invalid:
 * the ids asked break the contract (no request goes out), the answer states another tenant, type
 * or id than asked, or it fails the event contract or the source's strict schema; implausible: the
 * version leads the highest one known (0 when nothing is known) by more than the source's
 * `maxVersionLead`, or (ordered by occurred_at) the time leads this clock by more than the source's
 * `maxFutureSkewSeconds`, nothing sent. Ordered by occurred_at, stale means the answer's time is
 * not after the stored one.
 */
export type ReconcileOutcome = 'applied' | 'stale' | 'gone' | 'failed' | 'circuit_open' | 'invalid' | 'implausible';

export interface ReconcileRequest {
  tenantId: string;
  type: string;
  id: string;
  trigger: ReconcileTrigger;
  /** The source whose API to ask; default: the one source that owns the tenant and type. */
  sourceId?: string;
  /** The highest version the bridge has seen for it (the triggering event's): with the stored one, the base of `maxVersionLead`. */
  seenVersion?: number;
  /** Fetch and decide, publish nothing. */
  dryRun?: boolean;
}

export interface ReconcileReport {
  outcome: ReconcileOutcome;
  trigger: ReconcileTrigger;
  source: string;
  resourceKey: string;
  /** What orders the resource: its state row's ordering, else the source's for the type (undefined: nothing asked). */
  ordering?: ResourceOrdering;
  storedVersion: number | null;
  /** The stored row's occurred_at (ordered by occurred_at), ISO with microseconds; null: none. */
  storedOccurredAt?: string | null;
  storedDeleted: boolean;
  /** What the API answered (undefined when no request went out or none answered). */
  fetched?: { status: number; url: string; version?: number; occurredAt?: string; data?: Record<string, unknown> };
  /** The event published (or, on a dry run, that would be). */
  event?: EventEnvelope;
  published: boolean;
  attempts: number;
  reason?: string;
  error?: BridgeError;
}

/** One record for the events topic, keyed by resource like the ingress's. */
export interface EventsRecord {
  key: string;
  value: Buffer;
  headers: Record<string, string>;
}

export interface ReconcilerOptions {
  pool: Pool;
  sources: readonly ReconcileSource[];
  /** Produces to the events topic and resolves after the broker's ack. */
  publish: (record: EventsRecord) => Promise<void>;
  fetch?: typeof fetchSnapshot;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

interface SourceGuard {
  source: ReconcileSource;
  bucket: TokenBucket;
  breaker: CircuitBreaker;
}

/**
 * Push, then pull: fetches a resource's snapshot from its provider's API and publishes it to the
 * events topic as an event from `reconcile`, so it meets the same per-resource order, dedup,
 * version check, outbox and applied topic as a webhook. It never writes state itself.
 */
export class Reconciler {
  readonly #pool: Pool;
  #guards: SourceGuard[];
  readonly #publish: ReconcilerOptions['publish'];
  readonly #fetch: typeof fetchSnapshot;
  readonly #now: () => number;
  readonly #sleep: (ms: number) => Promise<void>;

  constructor(options: ReconcilerOptions) {
    this.#pool = options.pool;
    this.#publish = options.publish;
    this.#fetch = options.fetch ?? fetchSnapshot;
    this.#now = options.now ?? Date.now;
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    // One bucket and one breaker per source, shared by every reconciliation of this process.
    this.#guards = options.sources.map((source) => this.#guard(source));
  }

  /**
   * Replaces the sources (a configuration change while the worker runs). A source whose rate
   * limit and breaker settings did not change keeps its bucket and breaker, so an open breaker
   * stays open across an unrelated change; a pull already running finishes with the settings it began with.
   */
  setSources(sources: readonly ReconcileSource[]): void {
    const before = new Map(this.#guards.map((g) => [g.source.id, g]));
    this.#guards = sources.map((source) => {
      const kept = before.get(source.id);
      return kept !== undefined && sameGuardSettings(kept.source, source) ? { ...kept, source } : this.#guard(source);
    });
  }

  #guard(source: ReconcileSource): SourceGuard {
    return {
      source,
      bucket: new TokenBucket({ ...source.reconcile.rateLimit, now: this.#now }),
      breaker: new CircuitBreaker({ ...source.reconcile.breaker, now: this.#now }),
    };
  }

  get sources(): readonly ReconcileSource[] {
    return this.#guards.map((g) => g.source);
  }

  /** The source's breaker state (for logs and tests). */
  breakerState(sourceId: string): string | undefined {
    return this.#guards.find((g) => g.source.id === sourceId)?.breaker.state;
  }

  async reconcile(request: ReconcileRequest): Promise<ReconcileReport> {
    const guard = this.#guardFor(request);
    const { source } = guard;
    const key = resourceKey({ tenant_id: request.tenantId, resource: { type: request.type, id: request.id, version: 0 } });
    const base = { trigger: request.trigger, source: source.id, resourceKey: key, published: false };
    // The provider's API gets the source's credentials: ids the contract refuses (the CLI's and the
    // console's are typed by a person) are refused before anything is asked.
    const refused = resourceRefProblem(request);
    if (refused !== undefined)
      return { ...base, outcome: 'invalid', storedVersion: null, storedDeleted: false, attempts: 0, reason: refused };

    const pulled = await this.#pull(guard, request);
    const state = await selectResourceState(this.#pool, {
      tenant_id: request.tenantId,
      resource_type: request.type,
      resource_id: request.id,
    });
    // The row's ordering when there is a row (only events of it apply there), else the source's.
    const ordering: ResourceOrdering = state?.ordered_by ?? orderingOf(source, request.type);
    const storedVersion = state?.version == null ? null : Number(state.version);
    const storedMicros = state?.last_occurred_us == null ? null : BigInt(state.last_occurred_us);
    const storedDeleted = state?.deleted === true;
    const known = {
      ...base,
      ordering,
      storedVersion,
      storedOccurredAt: storedMicros === null ? null : formatMicros(storedMicros),
      storedDeleted,
      attempts: pulled.attempts,
    };
    if (!pulled.ok) {
      const outcome = pulled.error.code === 'reconcile_circuit_open' ? 'circuit_open' : 'failed';
      return { ...known, outcome, reason: `${pulled.error.code}: ${pulled.error.message}`, error: pulled.error };
    }
    const { answer } = pulled;

    const fetched = {
      status: answer.status,
      url: answer.url,
      ...(answer.version === undefined ? {} : { version: answer.version }),
      ...(answer.time === undefined ? {} : { occurredAt: answer.time.value }),
      ...(answer.kind === 'snapshot' ? { data: answer.data } : {}),
    };
    const stranger = identityMismatch(answer.stated, request);
    if (stranger !== undefined) return { ...known, outcome: 'invalid', fetched, reason: `answer_identity: ${stranger}: nothing sent` };
    if (ordering === 'occurred_at')
      return this.#byOccurredAt({ ...known, outcome: 'applied', fetched }, answer, storedMicros, request, source);

    if (answer.kind === 'gone' && answer.version === undefined) {
      // No version, no change: the API may lag behind its webhooks, the URL template may be wrong,
      // or a scope may hide the resource. The pushed event that triggered the pull stays applied.
      return { ...known, outcome: 'gone', fetched, reason: `HTTP ${answer.status} without a version: nothing sent` };
    }
    if (answer.version === undefined) {
      const error = new BridgeError('reconcile_bad_response', `${answer.url}: no integer "version" (or "resource.version")`, {
        retryable: false,
      });
      return { ...known, outcome: 'failed', fetched, reason: `${error.code}: ${error.message}`, error };
    }
    const version = answer.version;
    if (storedVersion !== null && version <= storedVersion) {
      return { ...known, outcome: 'stale', fetched, reason: `stored version ${storedVersion}` };
    }
    // Nothing known (an operator's pull of a resource never seen) bounds from 0: a sentinel such as
    // 2^53-1 would otherwise become the first state and make every real event stale.
    const highestKnown = Math.max(storedVersion ?? 0, request.seenVersion ?? 0);
    const lead = source.reconcile.maxVersionLead ?? DEFAULT_MAX_VERSION_LEAD;
    if (version - highestKnown > lead) {
      return {
        ...known,
        outcome: 'implausible',
        fetched,
        reason: `version ${version} leads the highest known version ${highestKnown} by more than maxVersionLead ${lead}`,
      };
    }
    const action = answer.kind === 'gone' ? 'deleted' : 'updated';
    const envelope = this.#envelope(request, action, { version }, answer.kind === 'gone' ? {} : answer.data);
    return this.#send({ ...known, outcome: 'applied', fetched }, envelope, request, source);
  }

  /**
   * A pull on a type ordered by occurred_at: the answer's own time orders it, as a pushed event's
   * does, never a version (the row may have none, and a version says nothing against a time). The
   * time must be stated, after the stored one, and not ahead of this clock by more than the
   * source's future-skew bound (the ingress's rule for a pushed time).
   */
  #byOccurredAt(
    report: ReconcileReport,
    answer: ProviderAnswer,
    storedMicros: bigint | null,
    request: ReconcileRequest,
    source: ReconcileSource,
  ): Promise<ReconcileReport> | ReconcileReport {
    if (answer.time === undefined) {
      if (answer.kind === 'gone')
        return { ...report, outcome: 'gone', reason: `HTTP ${answer.status} without a time (occurred_at or updated_at): nothing sent` };
      return {
        ...report,
        outcome: 'invalid',
        reason: 'answer_time: the type is ordered by occurred_at and the answer states no time (occurred_at or updated_at): nothing sent',
      };
    }
    const { field, value } = answer.time;
    if (!occurredAtSchema.safeParse(value).success)
      return {
        ...report,
        outcome: 'invalid',
        reason: `answer_time: ${field} ${value} is not an ISO-8601 time with an offset: nothing sent`,
      };
    const micros = occurredAtMicros(value);
    if (storedMicros !== null && micros <= storedMicros) {
      const tie = micros === storedMicros ? ' (same instant)' : '';
      return { ...report, outcome: 'stale', reason: `stored occurred_at ${formatMicros(storedMicros)}${tie}` };
    }
    const bound = source.maxFutureSkewSeconds ?? DEFAULT_MAX_FUTURE_SKEW_SECONDS;
    const ahead = occurredAtTooFarAhead(value, new Date(this.#now()), bound);
    if (ahead !== undefined)
      return { ...report, outcome: 'implausible', reason: describeFutureOccurredAt(ahead, "the pulling worker's clock") };
    const action = answer.kind === 'gone' ? 'deleted' : 'updated';
    // The provider's version travels along when stated (downstream may read it); it orders nothing.
    const envelope = this.#envelope(
      request,
      action,
      { ...(answer.version === undefined ? {} : { version: answer.version }), occurredAt: value },
      answer.kind === 'gone' ? {} : answer.data,
    );
    return this.#send({ ...report, outcome: 'applied' }, envelope, request, source, bound);
  }

  async #send(
    report: ReconcileReport,
    envelope: EventEnvelope,
    request: ReconcileRequest,
    source: ReconcileSource,
    /** Set for a time-ordered pull: the bound it was held to. */
    futureSkewSeconds?: number,
  ): Promise<ReconcileReport> {
    const value = Buffer.from(JSON.stringify(envelope), 'utf8');
    // The same checks a webhook must pass (the contract, then the source's strict schema, as the
    // ingress runs them): a provider API answering what its webhooks could not carry must not slip
    // past them into the state or the DLQ.
    const parsed = parseEvent(value);
    if (!parsed.ok) return { ...report, outcome: 'invalid', event: envelope, reason: `${parsed.code}: ${parsed.message}` };
    const strict = source.strictSchemas?.[request.type];
    if (strict !== undefined && eventAction(envelope) !== 'delete') {
      const problem = strict.check(envelope.data);
      if (problem !== undefined) return { ...report, outcome: 'invalid', event: envelope, reason: `strict_schema: ${problem}` };
    }
    if (request.dryRun) return { ...report, event: envelope };
    await this.#publish({
      key: report.resourceKey,
      value,
      headers: encodeEventHeaders({
        eventId: envelope.event_id,
        source: RECONCILE_SOURCE,
        receivedAt: new Date(this.#now()),
        bodySha256: parsed.bodySha256,
        eventType: envelope.event_type,
        reconcileTrigger: request.trigger,
        // A time-ordered pull is ordered by its time in the worker too, under the bound it passed here.
        ...(report.ordering === 'occurred_at' ? { orderedBy: 'occurred_at' as const } : {}),
        ...(futureSkewSeconds !== undefined && futureSkewSeconds !== DEFAULT_MAX_FUTURE_SKEW_SECONDS
          ? { maxFutureSkewSeconds: futureSkewSeconds }
          : {}),
      }),
    });
    return { ...report, event: envelope, published: true };
  }

  #envelope(
    request: ReconcileRequest,
    action: 'updated' | 'deleted',
    order: { version?: number; occurredAt?: string },
    data: Record<string, unknown>,
  ): EventEnvelope {
    return {
      // A fresh id per pull: pulling the same version twice is then a duplicate_version, never a
      // body mismatch (quarantine) under one id.
      event_id: `rec_${randomUUID()}`,
      event_type: `${request.type}.${action}`,
      event_version: 1,
      // Ordered by version, the time of the pull; ordered by occurred_at, the provider's stated time.
      occurred_at: order.occurredAt ?? new Date(this.#now()).toISOString(),
      tenant_id: request.tenantId,
      resource: { type: request.type, id: request.id, ...(order.version === undefined ? {} : { version: order.version }) },
      data,
    } as EventEnvelope;
  }

  async #pull(
    guard: SourceGuard,
    request: ReconcileRequest,
  ): Promise<{ ok: true; answer: ProviderAnswer; attempts: number } | { ok: false; error: BridgeError; attempts: number }> {
    const settings = guard.source.reconcile;
    let attempts = 0;
    let last: BridgeError | undefined;
    while (attempts < settings.attempts) {
      if (!guard.breaker.tryAcquire()) {
        const error = new BridgeError('reconcile_circuit_open', `the breaker of source "${guard.source.id}" is open`, { retryable: true });
        return { ok: false, error: last ?? error, attempts };
      }
      await guard.bucket.acquire();
      attempts += 1;
      try {
        const answer = await this.#fetch(settings, { tenant: request.tenantId, type: request.type, id: request.id });
        guard.breaker.onSuccess();
        return { ok: true, answer, attempts };
      } catch (error) {
        const bridgeError =
          error instanceof BridgeError ? error : new BridgeError('unknown', String(error), { retryable: true, cause: error });
        if (!bridgeError.retryable) {
          // An answer, if not a useful one: the API is up.
          guard.breaker.onSuccess();
          return { ok: false, error: bridgeError, attempts };
        }
        guard.breaker.onFailure();
        last = bridgeError;
      }
      if (attempts < settings.attempts) await this.#sleep(settings.retryDelayMs * 2 ** (attempts - 1));
    }
    return { ok: false, error: last!, attempts };
  }

  #guardFor(request: ReconcileRequest): SourceGuard {
    const what = `tenant "${request.tenantId}", type "${request.type}"`;
    if (request.sourceId !== undefined) {
      const guard = this.#guards.find((g) => g.source.id === request.sourceId);
      if (!guard)
        throw new BridgeError('reconcile_not_configured', `source "${request.sourceId}" has no reconcile settings`, { retryable: false });
      // Naming a source never widens what it may publish: the ingress's tenant and type check.
      if (!owns(guard.source, request))
        throw new BridgeError('reconcile_not_configured', `source "${request.sourceId}" does not own ${what}`, { retryable: false });
      return guard;
    }
    const owners = this.#guards.filter((g) => owns(g.source, request));
    if (owners.length === 1) return owners[0]!;
    if (owners.length === 0)
      throw new BridgeError('reconcile_not_configured', `no source with reconcile owns ${what}`, { retryable: false });
    throw new BridgeError(
      'reconcile_not_configured',
      `several sources own ${what} (${owners.map((g) => g.source.id).join(', ')}): name one`,
      {
        retryable: false,
      },
    );
  }
}

/** Why the contract refuses these ids (the ingress's rules for a key), or undefined. */
export function resourceRefProblem(ref: { tenantId: string; type: string; id: string }): string | undefined {
  const problems: string[] = [];
  if (!KEY_SEGMENT_PATTERN.test(ref.tenantId))
    problems.push(`tenant id ${JSON.stringify(ref.tenantId)} must match ${KEY_SEGMENT_PATTERN.source}`);
  if (!RESOURCE_TYPE_PATTERN.test(ref.type))
    problems.push(`resource type ${JSON.stringify(ref.type)} must match ${RESOURCE_TYPE_PATTERN.source}`);
  if (!KEY_SEGMENT_PATTERN.test(ref.id)) problems.push(`resource id ${JSON.stringify(ref.id)} must match ${KEY_SEGMENT_PATTERN.source}`);
  return problems.length === 0 ? undefined : `${problems.join('; ')}: nothing asked`;
}

/** How the answer's stated tenant, type or id differ from what was asked, or undefined. */
function identityMismatch(stated: StatedIdentity = {}, request: ReconcileRequest): string | undefined {
  const wrong: string[] = [];
  if (stated.tenantId !== undefined && stated.tenantId !== request.tenantId)
    wrong.push(`tenant_id ${JSON.stringify(stated.tenantId)} (asked ${JSON.stringify(request.tenantId)})`);
  for (const type of stated.type ?? [])
    if (type !== request.type) wrong.push(`type ${JSON.stringify(type)} (asked ${JSON.stringify(request.type)})`);
  for (const id of stated.id ?? []) if (id !== request.id) wrong.push(`id ${JSON.stringify(id)} (asked ${JSON.stringify(request.id)})`);
  return wrong.length === 0 ? undefined : `the answer is about another resource: ${wrong.join(', ')}`;
}

function sameGuardSettings(a: ReconcileSource, b: ReconcileSource): boolean {
  return JSON.stringify([a.reconcile.rateLimit, a.reconcile.breaker]) === JSON.stringify([b.reconcile.rateLimit, b.reconcile.breaker]);
}

function owns(source: ReconcileSource, request: { tenantId: string; type: string }): boolean {
  return source.tenants.includes(request.tenantId) && source.resourceTypes.includes(request.type);
}
