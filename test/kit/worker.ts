// The worker in tests: its config, a running one for a suite (useWorker), the events it reads, and
// what it leaves in Postgres and Kafka.
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { countUnpublishedOutbox } from '#domain/store/outbox.ts';
import { resourceKey, sampleThemeEvent, type EventEnvelope, type SampleThemeEventOverrides } from '#domain/contract/index.ts';
import type { SourceRecord } from '#domain/apply/index.ts';
import type { WorkerConfig } from '#services/worker/config.ts';
import type { TopicNames, TopicSettings } from '#plumbing/kafka/topics.ts';
import { startWorker, type WorkerDeps, type WorkerHandle } from '#services/worker/worker.ts';
import { RELAY_BATCH_BYTES } from '#services/worker/relay/index.ts';
import { uniqueName } from './names.ts';
import { useTestDatabase, type TestDatabase } from './db.ts';
import { suiteFixture, type FixtureOptions } from './fixture.ts';
import { testBrokers, testKafka, useTestTopics } from './kafka.ts';

export function workerTestConfig(input: {
  brokers: string[];
  databaseUrl: string;
  eventsTopic: string;
  appliedTopic: string;
  overrides?: Partial<WorkerConfig>;
}): WorkerConfig {
  return {
    brokers: input.brokers,
    clientId: uniqueName('worker'),
    databaseUrl: input.databaseUrl,
    databasePoolSize: 5,
    statementTimeoutMs: 10_000,
    logLevel: process.env.TEST_LOG_LEVEL ?? 'silent',
    eventsTopic: input.eventsTopic,
    appliedTopic: input.appliedTopic,
    adminPort: 0,
    groupId: uniqueName('theme-applier'),
    batchSize: 100,
    partitionsConcurrency: 3,
    sessionTimeoutMs: 10_000,
    maxBytesPerPartition: 1_048_576,
    relayBatchSize: 200,
    relayBatchBytes: RELAY_BATCH_BYTES,
    relayPollMs: 50,
    relaySendTimeoutMs: 10_000,
    crashAfter: 1,
    ...input.overrides,
  };
}

export interface TestWorkerOptions<D extends { url: string }> extends FixtureOptions {
  /** Brokers of the test's own (default: the test broker) and a client on them for the topics. */
  cluster?: { brokers: string[]; kafka: Kafka };
  /** The topic set's settings, over createTestTopics's. */
  topics?: Partial<TopicSettings>;
  /** Worker settings over workerTestConfig's; a function is given the topic names. */
  config?: Partial<WorkerConfig> | ((names: TopicNames) => Partial<WorkerConfig>);
  /** startWorker's dependencies; a function is called when the worker starts, given the database. */
  deps?: WorkerDeps | ((db: D) => WorkerDeps);
  /** Where the worker applies (default: a test database of its own, useTestDatabase). */
  database?: D;
  /** Runs once the topics exist, before the worker starts. */
  beforeStart?: () => Promise<void>;
}

export interface TestWorker<D> {
  db: D;
  /** A client on the test broker. */
  kafka: Kafka;
  settings: TopicSettings;
  names: TopicNames;
  groupId: string;
  /** The running worker (from the beforeAll on), closed after the suite. */
  worker: WorkerHandle;
}

/**
 * A worker for the suite, in this process, on a database and a topic set of its own: each made
 * before the suite's first test, in that order (the worker last), and ended after its last.
 */
export function useWorker<D extends { url: string } = TestDatabase>(options: TestWorkerOptions<D> = {}): TestWorker<D> {
  const db = options.database ?? (useTestDatabase() as unknown as D);
  const kafka = options.cluster?.kafka ?? testKafka();
  const { settings, names } = useTestTopics(kafka, options.topics);
  const groupId = uniqueName('theme-applier');
  const worker = suiteFixture(
    async () => {
      await options.beforeStart?.();
      const overrides = typeof options.config === 'function' ? options.config(names) : options.config;
      const config = workerTestConfig({
        brokers: options.cluster?.brokers ?? testBrokers(),
        databaseUrl: db.url,
        eventsTopic: names.events,
        appliedTopic: names.applied,
        overrides: { groupId, ...overrides },
      });
      return startWorker(config, typeof options.deps === 'function' ? options.deps(db) : options.deps);
    },
    (started) => started.close(),
    options,
  );
  return { db, kafka, settings, names, groupId, worker };
}

/** The worker process's environment (services/worker/main.ts) for a database, a topic set and a group. */
export function workerEnv(input: { brokers: string[]; databaseUrl: string; names: TopicNames; group: string }): Record<string, string> {
  return {
    KAFKA_BROKERS: input.brokers.join(','),
    DATABASE_URL: input.databaseUrl,
    TOPIC_EVENTS: input.names.events,
    TOPIC_APPLIED: input.names.applied,
    TOPIC_RETRY_LEVELS: String(input.names.retries.length),
    CONSUMER_GROUP: input.group,
  };
}

export function themeEvent(tenant: string, id: string, version: number, overrides: SampleThemeEventOverrides = {}): EventEnvelope {
  const event = sampleThemeEvent({ tenant_id: tenant, ...overrides, resource: { id, version } });
  if (event.event_type === 'theme.deleted') delete event.data;
  return event;
}

/** A record of the events topic (partition 0, at `offset`) carrying `event`, as an applier is given it. */
export function sourceRecord(event: EventEnvelope, offset: number): SourceRecord {
  return { topic: 'events', partition: 0, offset: String(offset), key: resourceKey(event), value: Buffer.from(JSON.stringify(event)) };
}

export interface RawEvent {
  key: string;
  value: string;
}

export function raw(envelope: EventEnvelope): RawEvent {
  return { key: resourceKey(envelope), value: JSON.stringify(envelope) };
}

/** Produces in order (one request per call), keyed like the ingress does. */
export async function produce(kafka: Kafka, topic: string, events: RawEvent[]): Promise<void> {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
  await producer.connect();
  try {
    for (let i = 0; i < events.length; i += 1000) {
      await producer.send({ topic, acks: -1, messages: events.slice(i, i + 1000).map((e) => ({ key: e.key, value: e.value })) });
    }
  } finally {
    await producer.disconnect();
  }
}

/** True when the group's committed offsets reach the topic's high watermarks on every partition. */
export async function groupCaughtUp(kafka: Kafka, groupId: string, topic: string): Promise<boolean> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const ends = await admin.fetchTopicOffsets(topic);
    const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return ends.every((end) => {
      const c = committed?.partitions.find((p) => p.partition === end.partition);
      return Number(end.high) === 0 || (c !== undefined && Number(c.offset) >= Number(end.high));
    });
  } finally {
    await admin.disconnect();
  }
}

export async function outboxDrained(pool: pg.Pool): Promise<boolean> {
  return (await countUnpublishedOutbox(pool)) === 0;
}

export async function stateOf(pool: pg.Pool, tenant: string, id: string) {
  const { rows } = await pool.query<{ version: string; deleted: boolean; data: unknown; last_event_id: string }>(
    `SELECT version, deleted, data, last_event_id FROM resource_state WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`,
    [tenant, id],
  );
  const row = rows[0];
  return row ? { ...row, version: Number(row.version) } : undefined;
}

export async function inboxStatus(
  pool: pg.Pool,
  eventId: string,
): Promise<{ status: string; reason: string | null; duplicate_of: string | null } | undefined> {
  const { rows } = await pool.query('SELECT status, reason, duplicate_of FROM inbox_events WHERE event_id = $1', [eventId]);
  return rows[0];
}

/** An inbox row's status and what the failure path wrote on it. */
export async function inboxRow(pool: pg.Pool, eventId: string) {
  const { rows } = await pool.query<{ status: string; reason: string | null; attempts: number; last_error: string | null }>(
    'SELECT status, reason, attempts, last_error FROM inbox_events WHERE event_id = $1',
    [eventId],
  );
  return rows[0];
}

/** The value of one sample of a metric (0 when absent). */
export async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  const match = values.find((v) => Object.entries(labels).every(([k, val]) => String(v.labels[k]) === val));
  return match?.value ?? 0;
}
