import type { ApplyOutcome, ParsedEvent } from './types.ts';

export interface KnownInboxRow {
  bodySha256: string;
  status: string;
}

export interface KnownState {
  version: number;
  deleted: boolean;
}

export interface Decision {
  event: ParsedEvent;
  outcome: Exclude<ApplyOutcome, 'invalid'>;
  reason?: string;
  storedVersion: number | null;
  versionGap: boolean;
  /** Write (insert, or settle a pending row) this event's inbox row. */
  writeInbox: boolean;
  duplicateOf?: string;
  originalBodySha256?: string;
}

/** Rows a failure path left behind (retry chain, DLQ); applying the same body again settles them. */
export const PENDING_INBOX_STATUSES: ReadonlySet<string> = new Set(['received', 'retrying', 'dead_lettered']);

export function idempotencyIndexKey(tenantId: string, idempotencyKey: string): string {
  return `${tenantId}\u0000${idempotencyKey}`;
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
    const known = inbox.get(envelope.event_id);
    const stored = states.get(event.resourceKey);
    const storedVersion = stored ? stored.version : null;
    const base = { event, storedVersion, versionGap: false };
    if (known && known.bodySha256 !== event.bodySha256) {
      decisions.push({
        ...base,
        outcome: 'quarantined',
        reason: 'event_id seen before with a different body',
        writeInbox: false,
        originalBodySha256: known.bodySha256,
      });
      continue;
    }
    if (known && !PENDING_INBOX_STATUSES.has(known.status)) {
      decisions.push({ ...base, outcome: 'duplicate', reason: 'event_id', writeInbox: false });
      continue;
    }
    const idemKey =
      envelope.idempotency_key === undefined ? undefined : idempotencyIndexKey(envelope.tenant_id, envelope.idempotency_key);
    const firstWithKey = idemKey === undefined ? undefined : idempotency.get(idemKey);
    if (firstWithKey !== undefined && firstWithKey !== envelope.event_id) {
      inbox.set(envelope.event_id, { bodySha256: event.bodySha256, status: 'duplicate' });
      decisions.push({
        ...base,
        outcome: 'duplicate',
        reason: 'idempotency_key',
        writeInbox: true,
        duplicateOf: firstWithKey,
      });
      continue;
    }
    const version = envelope.resource.version;
    let outcome: Decision['outcome'];
    let reason: string | undefined;
    let versionGap = false;
    if (stored && stored.version > version) {
      outcome = 'stale';
      reason = `stored version ${stored.version}`;
    } else if (stored && stored.version === version) {
      outcome = 'duplicate_version';
      reason = `stored version ${stored.version}`;
    } else {
      outcome = 'applied';
      versionGap = stored !== undefined && version > stored.version + 1;
      states.set(event.resourceKey, { version, deleted: event.action === 'delete' });
    }
    inbox.set(envelope.event_id, { bodySha256: event.bodySha256, status: outcome });
    if (idemKey !== undefined) idempotency.set(idemKey, envelope.event_id);
    decisions.push({ ...base, outcome, ...(reason === undefined ? {} : { reason }), versionGap, writeInbox: true });
  }
  return decisions;
}
