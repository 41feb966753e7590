// What each page reads, each part on its own: a part whose source (Postgres, the broker, the
// ingress's metrics) does not answer comes back as a problem to show, never as a crash.
import type { Admin, Kafka } from 'kafkajs';
import type pg from 'pg';
import { filterEntries, type DlqEntry } from '#domain/operations/dlq-records.ts';
import { inboxStatuses, readDlq, type InboxStatus } from '#domain/operations/dlq-replay.ts';
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
import type { ConsoleConfig } from './config.ts';
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
    part('Postgres', () => selectStatusCounts(pool)),
    part(`ingress metrics at ${config.ingressMetricsUrl}`, () => fetchIngressAnswers(config.ingressMetricsUrl)),
    part('Postgres', async () => ({
      unpublished: await countUnpublishedOutbox(pool),
      oldestAgeSeconds: await oldestUnpublishedOutboxAge(pool),
    })),
    part('Kafka', () =>
      clients.withAdmin(async (admin) => {
        const lag = await groupLag(admin, config.group, config.names.events);
        const retries = await retryWaiting({ kafka: clients.kafka, admin }, config.group, config.names.retries);
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

/** The console's DLQ filter: the CLI's (reason, since) plus source, tenant and an upper bound. */
export function filterDlq(entries: DlqEntry[], filter: DlqFilterInput): DlqEntry[] {
  return filterEntries(entries, {
    ...(filter.reason ? { reason: filter.reason } : {}),
    ...(filter.since !== undefined ? { since: filter.since } : {}),
  }).filter(
    (e) =>
      (!filter.source || entrySource(e) === filter.source) &&
      (!filter.tenant || e.tenantId === filter.tenant) &&
      (filter.until === undefined || (e.info ? e.info.deadLetteredAt.getTime() : e.timestamp) <= filter.until),
  );
}

export interface DlqView {
  topic: string;
  entries: Part<DlqEntry[]>;
  /** Every record's inbox status (keyed by tenant-scoped event key); absent when Postgres does not answer. */
  statuses: Part<Map<string, InboxStatus>>;
}

export async function loadDlq(clients: ConsoleClients, config: ConsoleConfig): Promise<DlqView> {
  const entries = await part('Kafka', () =>
    clients.withAdmin(async (admin) => {
      const read = await readDlq({ kafka: clients.kafka, admin, names: config.names }, 'bridge-console-dlq');
      if (!read) throw new Error(`DLQ topic ${config.names.dlq} does not exist`);
      return read.entries;
    }),
  );
  const statuses = entries.ok
    ? await part('Postgres', () => inboxStatuses(clients.pool, entries.value))
    : ({ ok: false, problem: 'no DLQ records read' } as const);
  return { topic: config.names.dlq, entries, statuses };
}

export async function search(clients: ConsoleClients, term: string): Promise<Part<SearchHitRow[]>> {
  return part('Postgres', () => searchInbox(clients.pool, term, 100));
}
