import { tenantScopedKey } from '#domain/apply/index.ts';
import { selectInboxStatuses } from '#domain/store/inbox.ts';
import type { Queryable } from '#domain/store/session.ts';
import { inboxKeyOf, type DlqEntry } from '../dlq-records.ts';

export interface InboxStatus {
  status: string;
  reason: string | null;
  attempts: number;
  body_sha256: string;
  updated_at: Date;
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
