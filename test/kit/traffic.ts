// A provider's steady traffic for the failure tests: signed requests through the real ingress on a
// fixed clock whatever the answers, every answer logged, and the ledger of what was accepted.
import { afterAll, beforeAll } from 'vitest';
import type pg from 'pg';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { post, signedRequest } from './ingress.ts';
import { topicRecordCount } from './kafka.ts';
import {
  AnswerLog,
  answerRecord,
  appliedLedger,
  dlqEntries,
  FINAL_STATUSES,
  inboxRows,
  resourceVersions,
  settledIds,
  stateProblems,
  type DlqEntry,
  type LedgerReport,
} from './ledger.ts';

export interface ProviderTrafficOptions {
  /** The ingress's URL (read at each request: the ingress may not be started yet when this is made). */
  url: () => string;
  tenant: string;
  /** Requests per second. */
  rate: number;
  /** Resources `<prefix><n>`, n below this, taken in turn. */
  resources: number;
  prefix: string;
  /** A busy resource that every tenth request goes to (if its previous one was answered). */
  hot?: string;
}

export interface AcceptedEvent {
  resource: string;
  version: number;
  answeredAt: number;
}

export interface TrafficLedger {
  problems: string[];
  /** Accepted events by their inbox status. */
  tally: Record<string, number>;
  applied: LedgerReport;
  dlq: DlqEntry[];
  /** Records on each retry topic that has any. */
  retried: Record<string, number>;
}

/**
 * One request per tick, one request per resource at a time, so a resource's versions reach the
 * ingress in order; a refused version is not sent again (the next one supersedes it).
 */
export class ProviderTraffic {
  readonly log = new AnswerLog();
  /** The last version sent, per resource. */
  readonly versions = new Map<string, number>();
  /** Answered 2xx, by event id. */
  readonly accepted = new Map<string, AcceptedEvent>();
  readonly #options: ProviderTrafficOptions;
  readonly #inFlight = new Set<string>();
  readonly #pending = new Set<Promise<void>>();
  /** Events known to have a final inbox status (checked once, never again). */
  readonly #settled = new Set<string>();
  #clock: NodeJS.Timeout | undefined;
  #tick = 0;
  #cold = 0;

  constructor(options: ProviderTrafficOptions) {
    this.#options = options;
  }

  /** Requests every 1/rate seconds from now on, until stop(). */
  start(): void {
    this.#clock ??= setInterval(() => this.fire(), 1000 / this.#options.rate);
  }

  /** No more requests; resolves when those in flight are answered. */
  async stop(): Promise<void> {
    clearInterval(this.#clock);
    this.#clock = undefined;
    await Promise.allSettled([...this.#pending]);
  }

  fire(): void {
    this.#tick += 1;
    const resource = this.#pick();
    if (resource === undefined) return;
    const { tenant, url } = this.#options;
    const version = (this.versions.get(resource) ?? 0) + 1;
    this.versions.set(resource, version);
    const request = signedRequest({ event: { tenant_id: tenant, resource: { id: resource, version } } });
    const event = { eventId: request.eventId, resource, version };
    this.#inFlight.add(resource);
    const sentAt = Date.now();
    const done = post(url(), request)
      .catch((e: Error) => e)
      .then((answer) => {
        const record = answerRecord(sentAt, answer, event);
        this.log.record(record);
        if (record.status >= 200 && record.status < 300)
          this.accepted.set(event.eventId, { resource, version, answeredAt: record.answeredAt });
      })
      .finally(() => {
        this.#inFlight.delete(resource);
        this.#pending.delete(done);
      });
    this.#pending.add(done);
  }

  #pick(): string | undefined {
    const { hot, resources, prefix } = this.#options;
    if (hot !== undefined && this.#tick % 10 === 0 && !this.#inFlight.has(hot)) return hot;
    for (let n = 0; n < resources; n += 1) {
      const resource = `${prefix}${this.#cold++ % resources}`;
      if (!this.#inFlight.has(resource)) return resource;
    }
    return undefined;
  }

  /** Those of `ids` without a final inbox status yet. */
  async unsettled(pool: pg.Pool, ids: string[]): Promise<string[]> {
    const open = ids.filter((id) => !this.#settled.has(id));
    for (const id of await settledIds(pool, this.#options.tenant, open)) this.#settled.add(id);
    return open.filter((id) => !this.#settled.has(id));
  }

  /**
   * The ledger of every event accepted so far, once things have settled: each ended applied, stale
   * or a duplicate (none dead-lettered, retrying or lost); each resource's state between its highest
   * accepted and its highest sent version; the applied topic holds every applied event once per key
   * in apply order (or a byte-identical replay), ending at the state, nothing foreign; nothing
   * dead-lettered, nothing on a retry topic.
   */
  async ledger(input: { pool: pg.Pool; kafka: Kafka; names: TopicNames }): Promise<TrafficLedger> {
    const { pool, kafka, names } = input;
    const { tenant } = this.#options;
    const ids = [...this.accepted.keys()];
    const problems: string[] = [];
    const rows = await inboxRows(pool, tenant, ids);
    const tally: Record<string, number> = {};
    for (const [id, a] of this.accepted) {
      const row = rows.get(id);
      const status = row?.status ?? 'missing';
      tally[status] = (tally[status] ?? 0) + 1;
      if (!FINAL_STATUSES.has(status)) {
        problems.push(
          `accepted ${id} (${a.resource} v${a.version}) ended ${status}${row ? ` (reason ${row.reason}, attempts ${row.attempts}: ${row.last_error})` : ' (lost)'}`,
        );
      }
    }
    const acceptedMax = new Map<string, number>();
    for (const a of this.accepted.values()) acceptedMax.set(a.resource, Math.max(acceptedMax.get(a.resource) ?? 0, a.version));
    const state = await resourceVersions(pool, tenant);
    problems.push(...stateProblems({ accepted: acceptedMax, sent: this.versions, state }));
    const applied = await appliedLedger({ pool, kafka, appliedTopic: names.applied, tenant, accepted: ids });
    problems.push(...applied.problems);
    const dlq = await dlqEntries(kafka, names.dlq);
    problems.push(...dlq.map((d) => `dead-lettered: ${d.eventId} (${d.key}) reason ${d.reason}: ${d.error}`));
    const retried: Record<string, number> = {};
    for (const topic of names.retries) {
      const n = await topicRecordCount(kafka, topic);
      if (n > 0) {
        retried[topic] = n;
        problems.push(`${n} records on ${topic}: an event was routed as a failure`);
      }
    }
    return { problems, tally, applied, dlq, retried };
  }
}

/**
 * Provider traffic for the suite: started by a beforeAll registered here (so after the ones written
 * before this call, which start the ingress), stopped after the suite's last test, before the
 * afterAll hooks written before this call (which stop the ingress) run.
 */
export function useProviderTraffic(options: ProviderTrafficOptions): ProviderTraffic {
  const traffic = new ProviderTraffic(options);
  beforeAll(() => traffic.start());
  afterAll(() => traffic.stop());
  return traffic;
}
