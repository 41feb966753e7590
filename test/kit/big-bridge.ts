// The data of a big bridge, as the operator console meets it: a million inbox rows over 30 days and a
// 100,000-record DLQ over 29 days. test/console/cheap-pages.test.ts checks what keeps the pages cheap
// on it, bench/console/run.ts times them on it; both fill it with these functions, so the test and
// the benchmark judge the same data. No vitest import: the benchmark runs outside the runner.
import pg from 'pg';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { EVENT_HEADERS } from '#domain/contract/event-headers.ts';
import { encodeDeadLetterInfo } from '#domain/failures/index.ts';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import type { Kafka, Message } from '#plumbing/kafka/types.ts';

const DAY_MS = 24 * 3600 * 1000;

export const BIG_BRIDGE = {
  inboxRows: 1_000_000,
  dlqRecords: 100_000,
  /** Of the events topic, and so of the DLQ (topicSpecs gives every topic the same count). */
  partitions: 12,
  /** The DLQ's records span the last 29 days (its retention is 30): the oldest are about to expire. */
  dlqSpanMs: 29 * DAY_MS,
  /** Inbox rows are `tenant_big_<i % tenants>`, dead letters `tenant_dlq_<i % tenants>`. */
  tenants: 50,
} as const;

/**
 * Inbox rows `evt_big_<i>`, one every 2.592 s over 30 days, newest first (i = 1 is now): statuses
 * mixed as a busy bridge's (90% applied), a trace id on every other row.
 */
export async function fillBigInbox(databaseUrl: string, rows: number = BIG_BRIDGE.inboxRows): Promise<void> {
  // A client of its own: a test pool's statement and read timeouts are for the hot path.
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    // Built after the rows, as a bulk load does: maintaining every index row by row takes minutes.
    const { rows: indexes } = await client.query<{ name: string; def: string }>(
      `SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'inbox_events' AND indexname <> 'inbox_events_pkey'`,
    );
    for (const i of indexes) await client.query(`DROP INDEX ${i.name}`);
    await client.query(
      `INSERT INTO inbox_events (event_id, idempotency_key, tenant_id, resource_type, resource_id, resource_version, event_type,
                               status, body_sha256, payload, fingerprint, trace_id, received_at, first_seen_at, updated_at)
     SELECT 'evt_big_' || i, 'idem_big_' || i, 'tenant_big_' || (i % ${BIG_BRIDGE.tenants}), 'theme', 'thm_big_' || (i % 100000), i, 'theme.updated',
            CASE WHEN i % 100 < 90 THEN 'applied' WHEN i % 100 < 95 THEN 'duplicate' WHEN i % 100 < 98 THEN 'stale'
                 WHEN i % 100 < 99 THEN 'dead_lettered' ELSE 'retrying' END,
            md5(i::text), NULL, md5(i::text), CASE WHEN i % 2 = 0 THEN lpad(to_hex(i), 32, '0') END,
            t, t, t
     FROM generate_series(1, $1) AS i, LATERAL (SELECT now() - i * interval '2592 milliseconds' AS t) AS at`,
      [rows],
    );
    for (const i of indexes) await client.query(i.def);
    await client.query('VACUUM ANALYZE inbox_events');
  } finally {
    await client.end();
  }
}

/**
 * Dead letters `evt_dlq_<i>` oldest first on `names.dlq`, record i on partition i % partitions,
 * timestamps (and dead-lettered-at) spread evenly over dlqSpanMs up to `now`; one in ten
 * `invalid_envelope`, the rest `retries_exhausted`. Returns each record's timestamp, by i.
 */
export async function fillBigDlq(kafka: Kafka, names: TopicNames, now: number, records: number = BIG_BRIDGE.dlqRecords): Promise<number[]> {
  const { partitions, tenants, dlqSpanMs } = BIG_BRIDGE;
  // Idempotent: a send retried after a partial failure (a partition without a leader yet on the
  // fresh topic, a timeout under load) rewrites every partition of the request, and only the
  // broker's sequence check keeps that from doubling records, which the expiry count would show.
  const producer = kafka.producer({
    createPartitioner: defaultPartitioner,
    allowAutoTopicCreation: false,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  const stamps: number[] = [];
  try {
    // Sends of 50 records per partition: the broker returns whole record batches, so batches far
    // larger than a dead-lettering worker's would make every small read decode hundreds of records.
    const batch = 50 * partitions;
    for (let start = 0; start < records; start += batch) {
      const messages: Message[] = [];
      for (let i = start; i < Math.min(records, start + batch); i += 1) {
        const at = now - dlqSpanMs + Math.floor((i * dlqSpanMs) / records);
        stamps.push(at);
        const tenant = `tenant_dlq_${i % tenants}`;
        const event = sampleThemeEvent({ tenant_id: tenant, event_id: `evt_dlq_${i}`, resource: { id: `thm_dlq_${i}`, version: 1 } });
        messages.push({
          partition: i % partitions,
          key: `${tenant}/theme/thm_dlq_${i}`,
          value: JSON.stringify(event),
          timestamp: String(at),
          headers: {
            [EVENT_HEADERS.eventId]: event.event_id,
            [EVENT_HEADERS.source]: `src-${i % 3}`,
            ...encodeDeadLetterInfo({
              attempt: 5,
              firstFailureAt: new Date(at - 60_000),
              lastErrorCode: i % 10 === 0 ? 'invalid_envelope' : 'db_unavailable',
              lastErrorMessage: 'generated',
              originalTopic: names.events,
              originalPartition: i % partitions,
              originalOffset: String(i),
              reason: i % 10 === 0 ? 'invalid_envelope' : 'retries_exhausted',
              deadLetteredAt: new Date(at),
              failedTopic: names.retries.at(-1)!,
            }),
          },
        });
      }
      await producer.send({ topic: names.dlq, acks: -1, messages });
    }
  } finally {
    await producer.disconnect();
  }
  return stamps;
}

/** The page's `/dlq/record?ref=` of dead letter i. */
export function bigDlqRef(i: number): string {
  return `${i % BIG_BRIDGE.partitions}:${Math.floor(i / BIG_BRIDGE.partitions)}`;
}
