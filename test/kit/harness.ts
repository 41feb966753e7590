import { randomBytes } from 'node:crypto';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { contractExampleEvent, sampleThemeEvent, type EventEnvelope, type SampleThemeEventOverrides } from '#domain/contract/index.ts';
import { failureSettingsFrom, failuresEnv } from '#domain/failures/index.ts';
import { parseConfig } from '#plumbing/config/env.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { signWebhook } from '#domain/signing/index.ts';
import type { WebhookSource } from '#domain/sources/index.ts';
import { startIngress, type IngressHandle } from '#services/ingress/ingress.ts';
import { startWorker, type WorkerHandle } from '#services/worker/worker.ts';
import type { WorkerConfig } from '#services/worker/config.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { readTopic, testBrokers, testKafka, topicRecordCount, type ReadRecord, createTestTopics } from './kafka.ts';
import { send, type Answer } from './ingress.ts';
import { groupCaughtUp, outboxDrained, workerTestConfig } from './worker.ts';
import { eventually } from './eventually.ts';
import { suiteFixture, type FixtureOptions } from './fixture.ts';

export type { Answer, ReadRecord };

/** Shortened retry delays, no jitter (production: 5 s, 30 s, 2 min, 10 min). */
export const RETRY_DELAYS_MS = [200, 300, 400, 500];

export const SECRET_A = 'contract-source-a-secret-0123456789';
export const SECRET_B = 'contract-source-b-secret-9876543210';

/** An hmac-sha256 source allowed to publish theme events for the given tenants. */
export function hmacSource(id: string, secret: string, tenants: string[]): WebhookSource {
  return {
    id,
    scheme: 'hmac-sha256',
    secrets: [{ id: `${id}-1`, value: secret }],
    tenants,
    // Required once the fix lands (a type error until then).
    resourceTypes: ['theme'],
    toleranceSeconds: 300,
  };
}

export interface HarnessOptions {
  sources: WebhookSource[];
  /** FAULT_INJECT rules for the worker, e.g. `permanent:<tenant>/theme/<id>:1`. */
  faults?: string[];
  /** More worker settings (e.g. `reconcile`). */
  worker?: Partial<WorkerConfig>;
}

export interface PostOptions {
  /** Extra headers; `undefined` removes a header the signer set (e.g. `x-webhook-id`). */
  headers?: Record<string, string | undefined>;
  /** The id the signer puts in X-Webhook-Id; default: the body's event_id. */
  id?: string;
}

export interface InboxRow {
  tenant_id: string;
  event_id: string;
  status: string;
  reason: string | null;
  idempotency_key: string | null;
  duplicate_of: string | null;
  resource_version: number;
}

export interface AppliedValue {
  event_id: string;
  tenant_id: string;
  resource: { type: string; id: string; version: number };
  action: string;
  data: Record<string, unknown> | null;
  occurred_at: string;
  applied_at: string;
}

export interface Harness {
  kafka: Kafka;
  db: TestDatabase;
  ingress: IngressHandle;
  worker: WorkerHandle;
  names: TopicNames;
  groupId: string;
  /** Signs `body` (exact bytes) with the source's first secret and POSTs it to /webhooks/<source>. */
  post: (sourceId: string, body: string | Buffer, options?: PostOptions) => Promise<Answer>;
  /** Main group and every retry group caught up on their topics, and the outbox published. */
  settle: () => Promise<void>;
  /** Records on the applied topic under this resource key (every key when omitted), parsed. */
  applied: (key?: string) => Promise<Array<{ record: ReadRecord; value: AppliedValue }>>;
  dlq: (key: string) => Promise<ReadRecord[]>;
  eventsCount: () => Promise<number>;
  inbox: (tenant: string, eventId: string) => Promise<InboxRow | undefined>;
  anomalies: (tenant: string, eventId: string) => Promise<number>;
  state: (tenant: string, id: string) => Promise<{ version: number; deleted: boolean; data: unknown; last_event_id: string } | undefined>;
  close: () => Promise<void>;
}

export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const kafka = testKafka();
  const db = await createTestDatabase();
  const { names } = await createTestTopics(kafka);
  const failures = failureSettingsFrom(
    parseConfig(failuresEnv, {
      RETRY_DELAYS_MS: RETRY_DELAYS_MS.join(','),
      RETRY_JITTER: '0',
      FAULT_INJECT: (options.faults ?? []).join(','),
    }),
  );
  const config = workerTestConfig({
    brokers: testBrokers(),
    databaseUrl: db.url,
    eventsTopic: names.events,
    appliedTopic: names.applied,
    overrides: { failures, retryLevels: names.retries.length, ...options.worker },
  });
  const worker = await startWorker(config, { adminServer: false });
  const ingress = await startIngress(
    {
      port: 0,
      host: '127.0.0.1',
      adminPort: 0,
      adminHost: '127.0.0.1',
      brokers: testBrokers(),
      topic: names.events,
      sources: options.sources,
    },
    { logger: createLogger({ name: 'ingress-contract', level: process.env.TEST_LOG_LEVEL ?? 'silent' }) },
  );
  const secrets = new Map(options.sources.map((s) => [s.id, s.secrets[0]!.value]));

  const post = async (sourceId: string, body: string | Buffer, postOptions: PostOptions = {}): Promise<Answer> => {
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const secret = secrets.get(sourceId);
    if (secret === undefined) throw new Error(`no source ${sourceId} in this harness`);
    let id = postOptions.id;
    if (id === undefined) {
      try {
        id = String((JSON.parse(bytes.toString('utf8')) as { event_id?: unknown }).event_id ?? 'evt_unknown');
      } catch {
        id = 'evt_unknown';
      }
    }
    const headers: Record<string, string> = signWebhook({ scheme: 'hmac-sha256', secret, body: bytes, id });
    for (const [name, value] of Object.entries(postOptions.headers ?? {})) {
      const lower = name.toLowerCase();
      if (value === undefined) delete headers[lower];
      else headers[lower] = value;
    }
    return send(ingress.url, { path: `/webhooks/${sourceId}`, headers: Object.entries(headers), body: bytes });
  };

  const settle = async (): Promise<void> => {
    await eventually(() => groupCaughtUp(kafka, config.groupId, names.events), { timeoutMs: 60_000, message: 'main group caught up' });
    for (const [i, topic] of names.retries.entries()) {
      await eventually(() => groupCaughtUp(kafka, `${config.groupId}.retry.${i + 1}`, topic), {
        timeoutMs: 60_000,
        message: `retry group ${i + 1} caught up`,
      });
    }
    await eventually(() => outboxDrained(db.pool), { timeoutMs: 60_000, message: 'outbox drained' });
  };

  return {
    kafka,
    db,
    ingress,
    worker,
    names,
    groupId: config.groupId,
    post,
    settle,
    applied: async (key) =>
      (await readTopic(kafka, names.applied))
        .filter((r) => key === undefined || r.key === key)
        .map((record) => ({ record, value: JSON.parse(record.value.toString('utf8')) as AppliedValue })),
    dlq: async (key) => (await readTopic(kafka, names.dlq)).filter((r) => r.key === key),
    eventsCount: () => topicRecordCount(kafka, names.events),
    inbox: async (tenant, eventId) => {
      const { rows } = await db.pool.query<InboxRow & { resource_version: string }>(
        `SELECT tenant_id, event_id, status, reason, idempotency_key, duplicate_of, resource_version
         FROM inbox_events WHERE tenant_id = $1 AND event_id = $2`,
        [tenant, eventId],
      );
      if (rows.length > 1) throw new Error(`${rows.length} inbox rows for ${tenant}/${eventId}`);
      const row = rows[0];
      return row ? { ...row, resource_version: Number(row.resource_version) } : undefined;
    },
    anomalies: async (tenant, eventId) => {
      const { rows } = await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM inbox_anomalies WHERE tenant_id = $1 AND event_id = $2',
        [tenant, eventId],
      );
      return rows[0]!.n;
    },
    state: async (tenant, id) => {
      const { rows } = await db.pool.query<{ version: string; deleted: boolean; data: unknown; last_event_id: string }>(
        `SELECT version, deleted, data, last_event_id FROM resource_state
         WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`,
        [tenant, id],
      );
      const row = rows[0];
      return row ? { ...row, version: Number(row.version) } : undefined;
    },
    close: async () => {
      await ingress.close();
      await worker.close();
      await db.drop();
    },
  };
}

/** A harness for the suite, started before its first test (options read then), closed after its last. */
export function useHarness(options: HarnessOptions | (() => HarnessOptions), fixture: FixtureOptions = {}): Harness {
  return suiteFixture(
    () => startHarness(typeof options === 'function' ? options() : options),
    (h) => h.close(),
    fixture,
  );
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** A fresh ULID-shaped event id (`evt_` + 26 Crockford base32 characters), as the contract's example has. */
export function freshEventId(): string {
  const bytes = randomBytes(26);
  return `evt_${Array.from(bytes, (b) => CROCKFORD[b % 32]).join('')}`;
}

export function freshId(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

export function resourceKeyOf(event: { tenant_id: string; resource: { type: string; id: string } }): string {
  return `${event.tenant_id}/${event.resource.type}/${event.resource.id}`;
}

/**
 * The contract's own example event (shared/domain/contract contractExampleEvent), verbatim except for a
 * fresh event_id, resource id and idempotency key (theme:<id>:v42), so that runs never collide.
 */
export function contractExample(fresh: { eventId?: string; resourceId?: string; tenant?: string } = {}) {
  const resourceId = fresh.resourceId ?? freshId('thm');
  const example = contractExampleEvent();
  return {
    ...example,
    event_id: fresh.eventId ?? freshEventId(),
    tenant_id: fresh.tenant ?? example.tenant_id,
    idempotency_key: `theme:${resourceId}:v42`,
    resource: { ...example.resource, id: resourceId },
    data: example.data as Record<string, unknown>,
  };
}

/** The headers a provider sends beside the signature for an event. */
export function providerHeaders(event: { event_type: string; idempotency_key?: string }): Record<string, string> {
  return {
    'X-Webhook-Event': event.event_type,
    ...(event.idempotency_key === undefined ? {} : { 'X-Idempotency-Key': event.idempotency_key }),
  };
}

/**
 * A theme event built from the project's own sample (shared/domain/contract sampleThemeEvent), which
 * the contract accepts today and after the fix: the tests that use it isolate one behaviour
 * (redelivery, tenants, idempotency, string and event-type checks) from the data contract.
 */
export function sampleEvent(tenant: string, id: string, version: number, overrides: SampleThemeEventOverrides = {}): EventEnvelope {
  return sampleThemeEvent({ tenant_id: tenant, ...overrides, resource: { id, version } });
}

export function body(event: unknown): string {
  return JSON.stringify(event);
}

export function errorCode(answer: Answer): string | undefined {
  try {
    return (JSON.parse(answer.body) as { error?: string }).error;
  } catch {
    return undefined;
  }
}

/** Status and body, for assertion messages. */
export function describeAnswer(answer: Answer): string {
  return `${answer.status} ${answer.body}`;
}
