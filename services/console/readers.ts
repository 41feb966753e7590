// What each page reads, each part on its own: a part whose source (Postgres, the broker, the
// ingress's metrics) does not answer comes back as a problem to show, never as a crash.
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import type pg from 'pg';
import { entryReason, type DlqEntry } from '#domain/operations/dlq-records.ts';
import { inboxStatuses, type InboxStatus } from '#domain/operations/dlq-replay/index.ts';
import {
  dlqExpiry,
  readDlqRecords,
  readDlqWindow,
  type DlqCursor,
  type DlqExpiry,
  type DlqReadClients,
  type DlqWindow,
} from '#domain/operations/dlq-window.ts';
import { retryWaiting, type RetryTopicWaiting } from '#domain/operations/retry-waiting.ts';
import { resourceTrace, type ResourceTrace } from '#domain/operations/trace.ts';
import { selectInboxStatuses } from '#domain/store/inbox.ts';
import { countUnpublishedOutbox, oldestUnpublishedOutboxAge } from '#domain/store/outbox.ts';
import {
  searchInbox,
  selectAppliedValues,
  selectOutcomesPerMinute,
  selectStatusCounts,
  type AppliedValueRow,
  type OutcomeMinuteRow,
  type SearchHitRow,
  type StatusCountRow,
} from '#domain/store/operator-views.ts';
import type { ResourceRef } from '#domain/store/state.ts';
import { groupLag, type LagRow } from '#plumbing/kafka/lag.ts';
import { headerText } from '#plumbing/kafka/headers.ts';
import { EVENT_HEADERS } from '#domain/contract/event-headers.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { DEFAULT_DLQ_EXPIRY_WARNING_MS, type ConsoleConfig } from './config.ts';
import { fetchIngressAnswers } from './ingress-answers.ts';
import { redactedJsonText, redactJson } from './redact.ts';

export type Part<T> = { ok: true; value: T } | { ok: false; problem: string };

export async function part<T>(what: string, read: () => Promise<T>): Promise<Part<T>> {
  try {
    return { ok: true, value: await read() };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, problem: `${what}: ${message || (error as { code?: string }).code || 'failed'}` };
  }
}

export interface ConsoleClients {
  pool: pg.Pool;
  kafka: Kafka;
  /** A connected admin client for one page; disconnected after. */
  withAdmin: <T>(fn: (admin: Admin) => Promise<T>) => Promise<T>;
  logger: Logger;
}

/** The overview's counts by outcome cover this many hours (a window: never a count of the whole inbox). */
export const TOTALS_HOURS = 24;

export interface Overview {
  minutes: number;
  perMinute: Part<OutcomeMinuteRow[]>;
  totals: Part<StatusCountRow[]>;
  ingress: Part<Record<string, number>>;
  lag: Part<LagRow[]>;
  outbox: Part<{ unpublished: number; oldestAgeSeconds: number }>;
  retries: Part<RetryTopicWaiting[]>;
}

export async function loadOverview(clients: ConsoleClients, config: ConsoleConfig, minutes = 60): Promise<Overview> {
  const { pool } = clients;
  const [perMinute, totals, ingress, outbox, kafkaParts] = await Promise.all([
    part('Postgres', () => selectOutcomesPerMinute(pool, minutes)),
    part('Postgres', () => selectStatusCounts(pool, TOTALS_HOURS)),
    part(`ingress metrics at ${config.ingressMetricsUrl}`, () => fetchIngressAnswers(config.ingressMetricsUrl)),
    part('Postgres', async () => ({
      unpublished: await countUnpublishedOutbox(pool),
      oldestAgeSeconds: await oldestUnpublishedOutboxAge(pool),
    })),
    part('Kafka', () =>
      clients.withAdmin(async (admin) => {
        const [lag, retries] = await Promise.all([
          groupLag(admin, config.group, config.names.events),
          retryWaiting({ kafka: clients.kafka, admin }, config.group, config.names.retries),
        ]);
        return { lag, retries };
      }),
    ),
  ]);
  return {
    minutes,
    perMinute,
    totals,
    ingress,
    outbox,
    lag: kafkaParts.ok ? { ok: true, value: kafkaParts.value.lag } : kafkaParts,
    retries: kafkaParts.ok ? { ok: true, value: kafkaParts.value.retries } : kafkaParts,
  };
}

export interface ResourceView {
  trace: Part<ResourceTrace>;
  applied: Part<AppliedValueRow[]>;
}

const SETTLING = new Set(['received', 'retrying']);

/** Waits until the worker settles an event (any inbox status but received or retrying); undefined after timeoutMs. */
export async function waitForInboxOutcome(
  pool: pg.Pool,
  key: { tenant_id: string; event_id: string },
  timeoutMs: number,
): Promise<{ status: string; reason: string | null } | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await selectInboxStatuses(pool, [key]);
    if (row && !SETTLING.has(row.status)) return { status: row.status, reason: row.reason };
    if (Date.now() >= deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export async function loadResource(clients: ConsoleClients, resource: ResourceRef): Promise<ResourceView> {
  const key = `${resource.tenant_id}/${resource.resource_type}/${resource.resource_id}`;
  const [trace, applied] = await Promise.all([
    part('Postgres', async () => {
      const t = await resourceTrace(clients.pool, resource);
      return t.state ? { ...t, state: { ...t.state, data: redactJson(t.state.data) } } : t;
    }),
    // The diff is taken between these redacted values too: a secret's change shows as no change.
    part('Postgres', async () =>
      (await selectAppliedValues(clients.pool, key, 200)).map((r) => ({ ...r, payload: redactedJsonText(r.payload) })),
    ),
  ]);
  return { trace, applied };
}

export interface DlqFilterInput {
  reason?: string;
  source?: string;
  tenant?: string;
  /** ms since the epoch, inclusive. */
  since?: number;
  until?: number;
}

export function entrySource(entry: DlqEntry): string | null {
  return headerText(entry.headers, EVENT_HEADERS.source) ?? null;
}

export interface DlqView {
  topic: string;
  window: Part<DlqWindow>;
  /** The shown records' inbox statuses (keyed by tenant-scoped event key); absent when Postgres does not answer. */
  statuses: Part<Map<string, InboxStatus>>;
  /** Dead letters the broker may delete soon (they can no longer be replayed once gone). */
  expiry: Part<DlqExpiry>;
}

/** Records per DLQ page, and records read at most to find them: a page's cost whatever the DLQ's size. */
export const DLQ_PAGE = { limit: 100, scanBudget: 3000 } as const;

export function dlqMatcher(filter: DlqFilterInput): (e: DlqEntry) => boolean {
  return (e) =>
    (!filter.reason || entryReason(e) === filter.reason) &&
    (!filter.source || entrySource(e) === filter.source) &&
    (!filter.tenant || e.tenantId === filter.tenant);
}

async function statusesOf(clients: ConsoleClients, entries: Part<DlqEntry[]>): Promise<Part<Map<string, InboxStatus>>> {
  return entries.ok ? part('Postgres', () => inboxStatuses(clients.pool, entries.value)) : { ok: false, problem: 'no DLQ records read' };
}

function withDlq<T>(clients: ConsoleClients, config: ConsoleConfig, read: (c: DlqReadClients) => Promise<T>): Promise<T> {
  return clients.withAdmin(async (admin) => {
    if (!(await admin.listTopics()).includes(config.names.dlq)) throw new Error(`DLQ topic ${config.names.dlq} does not exist`);
    return read({ kafka: clients.kafka, admin, topic: config.names.dlq, groupPrefix: 'bridge-console-dlq' });
  });
}

export async function loadDlqPage(
  clients: ConsoleClients,
  config: ConsoleConfig,
  filter: DlqFilterInput,
  before: DlqCursor | undefined,
  page: { limit: number; scanBudget: number } = DLQ_PAGE,
): Promise<DlqView> {
  // One admin client and one topic check for both: each is a round trip to the broker.
  const both = await part('Kafka', () =>
    withDlq(clients, config, (c) =>
      Promise.all([
        part('Kafka', () => readDlqWindow(c, { since: filter.since, until: filter.until, before, match: dlqMatcher(filter), ...page })),
        part('Kafka', () => dlqExpiry(c.admin, c.topic, config.dlqExpiryWarningMs ?? DEFAULT_DLQ_EXPIRY_WARNING_MS)),
      ]),
    ),
  );
  const [window, expiry] = both.ok ? both.value : [both, both];
  const statuses = await statusesOf(clients, window.ok ? { ok: true, value: window.value.entries } : window);
  return { topic: config.names.dlq, window, statuses, expiry };
}

export function loadDlqExpiry(clients: ConsoleClients, config: ConsoleConfig): Promise<Part<DlqExpiry>> {
  return part('Kafka', () =>
    withDlq(clients, config, (c) => dlqExpiry(c.admin, c.topic, config.dlqExpiryWarningMs ?? DEFAULT_DLQ_EXPIRY_WARNING_MS)),
  );
}

/** Exactly these records (refs `partition:offset`), with their inbox statuses. */
export async function loadDlqRecords(
  clients: ConsoleClients,
  config: ConsoleConfig,
  refs: string[],
): Promise<{ topic: string; entries: Part<DlqEntry[]>; statuses: Part<Map<string, InboxStatus>> }> {
  const parsed = refs.flatMap((r) => {
    const m = /^(\d{1,6}):(\d{1,19})$/.exec(r);
    return m ? [{ partition: Number(m[1]), offset: BigInt(m[2]!) }] : [];
  });
  const entries = await part('Kafka', () => withDlq(clients, config, (c) => readDlqRecords(c, parsed)));
  return { topic: config.names.dlq, entries, statuses: await statusesOf(clients, entries) };
}

export async function search(clients: ConsoleClients, term: string): Promise<Part<SearchHitRow[]>> {
  return part('Postgres', () => searchInbox(clients.pool, term, 100));
}
