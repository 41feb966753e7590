import { eventFingerprint, storedBodyFingerprint, type ReceivedEnvelope } from '#domain/contract/index.ts';
import { formatMicros } from '#domain/contract/occurred-at.ts';
import type { ApplyOutcome, ParsedEvent } from './types.ts';

/** An inbox row the decisions know of: from the database (payload) or decided earlier in the chunk (envelope). */
export interface KnownInboxRow {
  bodySha256: string;
  status: string;
  envelope?: ReceivedEnvelope;
  payload?: string;
  /** Stored by retention when it pruned the payload. */
  fingerprint?: string;
}

/**
 * Same bytes are the same event. Other bytes may still be the same event: a provider's redelivery
 * with another delivery_attempt, other whitespace or key order. The fingerprint (of the canonical
 * envelope without delivery-only fields) decides, and is computed only then: a redelivery with
 * other bytes is rare, and canonicalising every event would cost as much as parsing it.
 */
export function sameEventContent(known: KnownInboxRow, event: ParsedEvent): boolean {
  if (known.bodySha256 === event.bodySha256) return true;
  // A stored body is fingerprinted from its JSON, not re-checked against today's contract: one an
  // earlier release accepted must still match its redelivery.
  const knownFingerprint =
    known.envelope !== undefined
      ? eventFingerprint(known.envelope)
      : known.payload !== undefined
        ? storedBodyFingerprint(known.payload)
        : known.fingerprint;
  // A row that can no longer be compared (no body, no fingerprint) is reported as an anomaly, not guessed.
  return knownFingerprint !== undefined && knownFingerprint === eventFingerprint(event.envelope);
}

export interface KnownState {
  /** null: the row was applied by occurred_at from an event without a version (or switched to version from there). */
  version: number | null;
  deleted: boolean;
  /** The occurred_at (microseconds) that ordered the row; null or absent: none known. */
  occurredAtMicros?: bigint | null;
  /** What orders the row, recorded with it: an event of the other ordering never applies to it. */
  orderedBy: 'version' | 'occurred_at';
}

export interface Decision {
  event: ParsedEvent;
  outcome: Exclude<ApplyOutcome, 'invalid'>;
  reason?: string;
  /** null when there was no stored row (or, ordered by occurred_at, when it had no version). */
  storedVersion: number | null;
  /** Ordered by occurred_at: the stored row's occurred_at it was compared with (null: none). */
  storedOccurredAtMicros?: bigint | null;
  versionGap: boolean;
  /** Write (insert, or settle a pending row) this event's inbox row. */
  writeInbox: boolean;
  duplicateOf?: string;
}

export const QUARANTINE_REASON = 'event_id seen before with different content';

/** The failure code (DLQ reason, metric label) of an event whose ordering is not its resource's. */
export const ORDERING_MISMATCH = 'ordering_mismatch';

/** Why an event of one ordering does not apply to a resource of the other: both named, for the operator. */
export function orderingMismatchReason(eventOrdering: 'version' | 'occurred_at', resourceOrdering: 'version' | 'occurred_at'): string {
  return `event ordered by ${eventOrdering}, resource ordered by ${resourceOrdering}`;
}

/** Rows a failure path left behind (retry chain, DLQ); applying the same body again settles them. */
export const PENDING_INBOX_STATUSES: ReadonlySet<string> = new Set(['received', 'retrying', 'dead_lettered']);

/** Event ids and idempotency keys are scoped to their tenant (NUL never occurs in either: the ingress refuses it). */
export function tenantScopedKey(tenantId: string, value: string): string {
  return `${tenantId}\u0000${value}`;
}

/**
 * Decides every event of a chunk in order, against what the database knew when the chunk's keys
 * were locked. The maps are updated as it goes, so a later event of the same chunk sees the
 * effect of an earlier one exactly as if each had run in its own transaction.
 */
export function decideOutcomes(
  events: readonly ParsedEvent[],
  inbox: Map<string, KnownInboxRow>,
  idempotency: Map<string, string>,
  states: Map<string, KnownState>,
): Decision[] {
  const decisions: Decision[] = [];
  for (const event of events) {
    const { envelope } = event;
    const eventKey = tenantScopedKey(envelope.tenant_id, envelope.event_id);
    const known = inbox.get(eventKey);
    const stored = states.get(event.resourceKey);
    const storedVersion = stored ? stored.version : null;
    const base =
      event.orderedBy === 'version'
        ? { event, storedVersion, versionGap: false }
        : { event, storedVersion, storedOccurredAtMicros: stored?.occurredAtMicros ?? null, versionGap: false };
    // A redelivery (other delivery_attempt, whitespace or key order) has the same fingerprint.
    if (known && !sameEventContent(known, event)) {
      decisions.push({ ...base, outcome: 'quarantined', reason: QUARANTINE_REASON, writeInbox: false });
      continue;
    }
    if (known && !PENDING_INBOX_STATUSES.has(known.status)) {
      decisions.push({ ...base, outcome: 'duplicate', reason: 'event_id', writeInbox: false });
      continue;
    }
    const idemKey = envelope.idempotency_key === undefined ? undefined : tenantScopedKey(envelope.tenant_id, envelope.idempotency_key);
    const firstWithKey = idemKey === undefined ? undefined : idempotency.get(idemKey);
    if (firstWithKey !== undefined && firstWithKey !== envelope.event_id) {
      inbox.set(eventKey, { bodySha256: event.bodySha256, status: 'duplicate', envelope });
      decisions.push({
        ...base,
        outcome: 'duplicate',
        reason: 'idempotency_key',
        writeInbox: true,
        duplicateOf: firstWithKey,
      });
      continue;
    }
    // A resource lives by one ordering. An event of the other has nothing it may be compared with
    // (a version against a time), so it neither applies nor is called stale: the failure path
    // dead-letters it and records its inbox row there (left pending, so a replay after an
    // operator's switch settles it).
    if (stored && stored.orderedBy !== event.orderedBy) {
      decisions.push({
        ...base,
        outcome: 'ordering_mismatch',
        reason: orderingMismatchReason(event.orderedBy, stored.orderedBy),
        writeInbox: false,
      });
      continue;
    }
    let outcome: Decision['outcome'];
    let reason: string | undefined;
    let versionGap = false;
    if (event.orderedBy === 'occurred_at') {
      ({ outcome, reason } = byOccurredAt(event, stored));
      if (outcome === 'applied') {
        states.set(event.resourceKey, {
          version: envelope.resource.version ?? null,
          deleted: event.action === 'delete',
          occurredAtMicros: event.occurredAtMicros!,
          orderedBy: 'occurred_at',
        });
      }
    } else {
      const version = envelope.resource.version!;
      // A row switched to version without one (it was time-ordered, no version sent) has nothing
      // to compare: its first versioned event applies.
      if (stored && stored.version !== null && stored.version > version) {
        outcome = 'stale';
        reason = `stored version ${stored.version}`;
      } else if (stored && stored.version === version) {
        outcome = 'duplicate_version';
        reason = `stored version ${stored.version}`;
      } else {
        outcome = 'applied';
        versionGap = stored !== undefined && stored.version !== null && version > stored.version + 1;
        states.set(event.resourceKey, { version, deleted: event.action === 'delete', occurredAtMicros: null, orderedBy: 'version' });
      }
    }
    inbox.set(eventKey, { bodySha256: event.bodySha256, status: outcome, envelope });
    // Only the event that applied claims its key: a stale or failed one must not block the
    // corrected republish of the same business effect.
    if (idemKey !== undefined && outcome === 'applied') idempotency.set(idemKey, envelope.event_id);
    decisions.push({ ...base, outcome, ...(reason === undefined ? {} : { reason }), versionGap, writeInbox: true });
  }
  return decisions;
}

/**
 * Seed 002's fallback: an event applies only when its occurred_at is after the stored one. A tie
 * is `stale`, not `duplicate_version`: two events at one instant may be two different changes
 * (parallel updates, coarse clocks), and nothing says which is later, so the first applied stays.
 * A repeat of the same event is still `duplicate`, by event id, before this point. A row switched
 * to occurred_at without a known time (its last event's inbox row was gone) has nothing to
 * compare: its first time-ordered event applies.
 */
function byOccurredAt(event: ParsedEvent, stored: KnownState | undefined): { outcome: 'applied' | 'stale'; reason?: string } {
  const storedAt = stored?.occurredAtMicros;
  if (storedAt === undefined || storedAt === null || event.occurredAtMicros! > storedAt) return { outcome: 'applied' };
  const tie = event.occurredAtMicros === storedAt;
  return { outcome: 'stale', reason: `stored occurred_at ${formatMicros(storedAt)}${tie ? ' (same instant)' : ''}` };
}
