import { describe, expect, it } from 'vitest';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { SnapshotApplier } from '#domain/apply/index.ts';
import { resourceKey, sampleThemeEvent, type ReceivedEnvelope } from '#domain/contract/index.ts';
import { readTopic } from '../kit/kafka.ts';
import { eventually } from '../kit/eventually.ts';
import { metricValue, useWorker } from '../kit/worker.ts';
import { ingressHeaders as recordHeaders } from '../kit/ingress.ts';

// A record already on the events topic, dated far ahead of the time the ingress received it: one
// an ingress accepted before the bound existed, seen again by a DLQ replay or a reprocess. It goes
// to the DLQ with a reason of its own and is never applied, so the resource's next real update
// still applies.

const T = 'tenant_future';

interface Headers {
  [name: string]: string;
}

function envelope(id: string, occurredAt: string, version?: number): ReceivedEnvelope {
  const event: ReceivedEnvelope = sampleThemeEvent({ tenant_id: T, occurred_at: occurredAt, resource: { id, version: version ?? 0 } });
  if (version === undefined) delete (event.resource as { version?: number }).version;
  return event;
}

/** The headers an ingress writes (received-at given), as a replayed record carries them. */
function ingressHeaders(event: ReceivedEnvelope, body: string, extra: Headers = {}, source = 'demo-time'): Headers {
  return { ...recordHeaders(event, body, { source }), ...extra };
}

async function produceRecords(
  kafka: Kafka,
  topic: string,
  records: Array<{ event: ReceivedEnvelope; headers?: (body: string) => Headers }>,
) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
  await producer.connect();
  try {
    await producer.send({
      topic,
      acks: -1,
      messages: records.map(({ event, headers }) => {
        const value = JSON.stringify(event);
        return { key: resourceKey(event), value, ...(headers === undefined ? {} : { headers: headers(value) }) };
      }),
    });
  } finally {
    await producer.disconnect();
  }
}

const secondsFromNow = (s: number) => new Date(Date.now() + s * 1000).toISOString();

describe('worker: an occurred_at far ahead of received-at', () => {
  const { db, kafka, names, worker } = useWorker({
    topics: { eventsPartitions: 2 },
    config: (names) => ({ retryLevels: names.retries.length }),
  });

  const state = async (id: string) =>
    (
      await db.pool.query<{ version: string | null; last_occurred_at: Date | null; last_event_id: string }>(
        `SELECT version, last_occurred_at, last_event_id FROM resource_state WHERE tenant_id = $1 AND resource_id = $2`,
        [T, id],
      )
    ).rows[0];
  const inbox = async (eventId: string) =>
    (await db.pool.query<{ status: string; reason: string }>('SELECT status, reason FROM inbox_events WHERE event_id = $1', [eventId]))
      .rows[0];
  const deadLetter = (eventId: string) =>
    // By body: a record written without headers has no event-id header.
    eventually(async () => (await readTopic(kafka, names.dlq)).find((r) => r.value.toString().includes(`"${eventId}"`)), {
      message: `${eventId} dead-lettered`,
    });

  it('dead-letters a time-ordered record dated 2062 with its reason, and the next real update applies', async () => {
    const future = envelope('frozen', '2062-01-01T00:00:00Z');
    await produceRecords(kafka, names.events, [
      { event: future, headers: (body) => ingressHeaders(future, body, { 'ordered-by': 'occurred_at' }) },
    ]);
    const dlq = await deadLetter(future.event_id);
    expect(dlq.headers['dlq-reason']).toBe('occurred_at_in_future');
    expect(dlq.headers['retry-last-error-message']).toMatch(
      /^occurred_at 2062-01-01T00:00:00Z is \d+ s ahead of received-at .*at most 300 s/,
    );
    expect(await inbox(future.event_id)).toEqual({ status: 'dead_lettered', reason: 'occurred_at_in_future' });
    expect(await state('frozen')).toBeUndefined();
    expect(await metricValue(worker.registry, 'dead_letter_total', { reason: 'occurred_at_in_future' })).toBeGreaterThanOrEqual(1);

    const now = envelope('frozen', new Date().toISOString());
    await produceRecords(kafka, names.events, [
      { event: now, headers: (body) => ingressHeaders(now, body, { 'ordered-by': 'occurred_at' }) },
    ]);
    const applied = await eventually(async () => state('frozen'), { message: 'the real update applied' });
    expect(applied.last_event_id).toBe(now.event_id);
    expect(applied.last_occurred_at?.toISOString()).toBe(new Date(now.occurred_at).toISOString());
  });

  it('judges every ordering and source alike: a version-ordered event, a pulled snapshot', async () => {
    // Inbox occurred_at values seed the order when a type later switches to occurred_at.
    const versioned = envelope('versioned', '2062-01-01T00:00:00Z', 7);
    const pulled = envelope('pulled', '2062-01-01T00:00:00Z', 3);
    await produceRecords(kafka, names.events, [
      { event: versioned, headers: (body) => ingressHeaders(versioned, body, {}, 'demo') },
      { event: pulled, headers: (body) => ingressHeaders(pulled, body, { 'reconcile-trigger': 'operator' }, 'reconcile') },
    ]);
    expect((await deadLetter(versioned.event_id)).headers['dlq-reason']).toBe('occurred_at_in_future');
    expect((await deadLetter(pulled.event_id)).headers['dlq-reason']).toBe('occurred_at_in_future');
    expect(await state('versioned')).toBeUndefined();
    expect(await state('pulled')).toBeUndefined();
  });

  it('without received-at, judges by the record timestamp; a header bound from the ingress is honoured', async () => {
    const bare = envelope('bare', '2062-01-01T00:00:00Z', 1);
    // Accepted under a source's wider bound: 30 minutes ahead is within the 3600 s the record carries.
    const wide = envelope('wide', secondsFromNow(1800), 1);
    const tooWide = envelope('too-wide', secondsFromNow(7200), 1);
    await produceRecords(kafka, names.events, [
      { event: bare },
      { event: wide, headers: (body) => ingressHeaders(wide, body, { 'max-future-skew': '3600' }, 'demo') },
      { event: tooWide, headers: (body) => ingressHeaders(tooWide, body, { 'max-future-skew': '3600' }, 'demo') },
    ]);
    expect((await deadLetter(bare.event_id)).headers['dlq-reason']).toBe('occurred_at_in_future');
    expect((await deadLetter(tooWide.event_id)).headers['retry-last-error-message']).toContain('at most 3600 s');
    await eventually(async () => (await inbox(wide.event_id))?.status === 'applied', { message: 'the wide one applied' });
  });

  it('is refused by the apply path itself, as `bridge reprocess` feeds it: invalid, nothing written', async () => {
    const future = envelope('reprocessed', '2062-01-01T00:00:00Z');
    const value = JSON.stringify(future);
    const result = await new SnapshotApplier({ pool: db.pool }).apply({
      topic: names.events,
      partition: 0,
      offset: '0',
      key: resourceKey(future),
      value: Buffer.from(value),
      headers: ingressHeaders(future, value, { 'ordered-by': 'occurred_at' }),
    });
    expect(result.outcome).toBe('invalid');
    expect(result.reason).toBe('occurred_at_in_future');
    expect(result.error?.code).toBe('occurred_at_in_future');
    expect(await inbox(future.event_id)).toBeUndefined();
    expect(await state('reprocessed')).toBeUndefined();
  });
});
