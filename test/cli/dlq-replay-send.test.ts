import { describe, expect, it } from 'vitest';
import { TOPIC_RESOURCE_TYPE } from '#plumbing/kafka/topics.ts';
import { resourceKey, sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';
import { encodeDeadLetterInfo } from '#domain/failures/index.ts';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { createTestTopics, readTopic, testBrokers, testKafka, useTestAdmin } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { ingressHeaders } from '../kit/ingress.ts';

const tenant = 'tenant_acme';
const PARTITIONS = 3;

/** An event whose key lands on `partition` of a PARTITIONS-partition topic (murmur2, as the ingress). */
function eventOn(partition: number, extra: Partial<EventEnvelope> = {}): EventEnvelope {
  for (let i = 0; ; i += 1) {
    const event = sampleThemeEvent({ tenant_id: tenant, resource: { id: `${uniqueName('thm')}-${i}`, version: 1 }, ...extra });
    if (partitionForKey(resourceKey(event), PARTITIONS) === partition) return event;
  }
}

function dlqRecord(event: EventEnvelope, names: { events: string; dlq: string }, body = JSON.stringify(event)) {
  const at = new Date(Date.now() - 60_000);
  return {
    key: resourceKey(event),
    value: body,
    headers: {
      ...ingressHeaders(event, body, { receivedAt: at }),
      ...encodeDeadLetterInfo({
        attempt: 1,
        firstFailureAt: at,
        lastErrorCode: 'constraint_violation',
        lastErrorMessage: 'check violated',
        originalTopic: names.events,
        originalPartition: 0,
        originalOffset: '0',
        reason: 'constraint_violation',
        deadLetteredAt: at,
        failedTopic: names.events,
      }),
    },
  };
}

interface Outcome {
  event_id: string;
  status: string;
  ok: boolean;
  partition?: number;
  offset?: string;
  detail?: string;
}

describe('bridge dlq replay: per-record send results (as a subprocess)', () => {
  const kafka = testKafka();
  const admin = useTestAdmin(kafka);

  it('--no-wait reports each record with the partition and offset the broker acknowledged', async () => {
    const { settings, names } = await createTestTopics(kafka, { eventsPartitions: PARTITIONS });
    const env = bridgeEnv({ brokers: testBrokers(), events: settings.events, applied: settings.applied, partitions: PARTITIONS });
    // Something already on the events topic, so an offset of 0 cannot pass by luck.
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const filler = [0, 1, 2].map((p) => eventOn(p));
    await producer.send({
      topic: names.events,
      acks: -1,
      messages: filler.map((e) => ({
        key: resourceKey(e),
        value: JSON.stringify(e),
        partition: partitionForKey(resourceKey(e), PARTITIONS),
      })),
    });
    const replayed = [eventOn(0), eventOn(1), eventOn(1), eventOn(2)];
    await producer.send({ topic: names.dlq, acks: -1, messages: replayed.map((e) => dlqRecord(e, names)) });
    await producer.disconnect();

    const run = await runBridge(['dlq', 'replay', '--all', '--no-wait', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    const outcomes = run.json<{ failed: number; outcomes: Outcome[] }>().outcomes;
    expect(outcomes).toHaveLength(4);
    const onTopic = (await readTopic(kafka, names.events)).filter((r) => r.headers['replayed-from'] !== undefined);
    expect(onTopic).toHaveLength(4);
    for (const o of outcomes) {
      expect(o).toMatchObject({ status: 'sent', ok: true });
      const record = onTopic.find((r) => r.headers['event-id'] === o.event_id)!;
      expect({ partition: o.partition, offset: o.offset }, o.event_id).toEqual({ partition: record.partition, offset: record.offset });
    }
  });

  it('a record the broker refuses is reported as failed (exit 1); the others are reported as written, with their offsets', async () => {
    const { settings, names } = await createTestTopics(kafka, { eventsPartitions: PARTITIONS });
    const env = bridgeEnv({ brokers: testBrokers(), events: settings.events, applied: settings.applied, partitions: PARTITIONS });
    // The events topic takes at most 4 KiB per batch; the DLQ (default limit) holds a bigger record.
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: TOPIC_RESOURCE_TYPE, name: names.events, configEntries: [{ name: 'max.message.bytes', value: '4096' }] }],
    });
    const big = eventOn(0, { data: { ...sampleThemeEvent().data, name: 'x'.repeat(16_000) } as never });
    const small = [eventOn(1), eventOn(2)];
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await producer.send({ topic: names.dlq, acks: -1, messages: [big, ...small].map((e) => dlqRecord(e, names)) });
    await producer.disconnect();

    const run = await runBridge(['dlq', 'replay', '--all', '--no-wait', '--json'], env);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    const result = run.json<{ failed: number; outcomes: Outcome[] }>();
    expect(result.failed).toBe(1);
    const byId = new Map(result.outcomes.map((o) => [o.event_id, o]));
    expect(byId.get(big.event_id)).toMatchObject({
      status: 'send_failed',
      ok: false,
      partition: 0,
      detail: expect.stringMatching(/larger than the max message size/),
    });
    expect(byId.get(big.event_id)!.offset).toBeUndefined();

    const onTopic = await readTopic(kafka, names.events);
    expect(onTopic.map((r) => r.headers['event-id']).sort()).toEqual(small.map((e) => e.event_id).sort());
    for (const e of small) {
      const record = onTopic.find((r) => r.headers['event-id'] === e.event_id)!;
      expect(byId.get(e.event_id)).toMatchObject({ status: 'sent', ok: true, partition: record.partition, offset: record.offset });
    }
  });
});
