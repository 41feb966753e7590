import { describe, expect, it } from 'vitest';
import { Kafka as CloudEventsKafka, type KafkaEvent, type KafkaMessage } from 'cloudevents';
import { body, hmacSource, providerHeaders, resourceKeyOf, sampleEvent, SECRET_A, useHarness } from '../kit/harness.ts';

const TENANT = 'tenant_acme';
const SOURCE = 'provider';

// Downstream teams using a CloudEvents SDK read the applied topic without knowing our schema:
// records are in the Kafka binding's binary content mode (ce_* headers, our JSON as the data).
describe('applied topic: every record is a CloudEvent', () => {
  const h = useHarness({ sources: [hmacSource(SOURCE, SECRET_A, [TENANT])] });

  it('the cloudevents SDK reads id, source, type, subject, time and data of an upsert and a delete', async () => {
    const id = `thm_ce-${Date.now().toString(36)}`;
    const upsert = sampleEvent(TENANT, id, 1, { event_type: 'theme.updated', occurred_at: '2026-11-30T23:00:00+07:00' });
    const remove = sampleEvent(TENANT, id, 2, { event_type: 'theme.deleted', occurred_at: '2026-12-01T08:00:00Z', data: {} });
    for (const event of [upsert, remove]) {
      const answer = await h.post(SOURCE, body(event), { headers: providerHeaders(event) });
      expect(answer.status, answer.body).toBe(202);
    }
    await h.settle();

    const records = await h.applied(resourceKeyOf(upsert));
    expect(records).toHaveLength(2);
    const events = records.map(
      ({ record }) =>
        CloudEventsKafka.toEvent({
          key: record.key,
          value: record.value.toString(),
          body: undefined,
          headers: record.headers,
        } as KafkaMessage<string>) as KafkaEvent<unknown>,
    );
    expect(events.map((e) => [e.id, e.source, e.type, e.subject, e.specversion])).toEqual([
      [upsert.event_id, `/theme-bridge/tenants/${TENANT}`, 'theme.upserted', `${TENANT}/theme/${id}`, '1.0'],
      [remove.event_id, `/theme-bridge/tenants/${TENANT}`, 'theme.deleted', `${TENANT}/theme/${id}`, '1.0'],
    ]);
    expect(events.map((e) => new Date(e.time!).toISOString())).toEqual(['2026-11-30T16:00:00.000Z', '2026-12-01T08:00:00.000Z']);
    // The data is our applied record, unchanged.
    expect(events.map((e) => e.data)).toEqual(records.map((r) => r.value));
    expect(events[0]!.partitionkey).toBe(`${TENANT}/theme/${id}`);
  });
});
