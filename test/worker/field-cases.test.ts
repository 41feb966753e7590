import { beforeAll, describe, expect, it } from 'vitest';
import type { SourceRecord } from '#domain/apply/index.ts';
import { readTopic } from '../kit/kafka.ts';
import { groupCaughtUp, inboxStatus, outboxDrained, produce, raw, stateOf, themeEvent, useWorker } from '../kit/worker.ts';
import { eventually } from '../kit/eventually.ts';

const T = 'tenant_field';

describe('worker: the cases the field knows', () => {
  const failures: Array<{ record: SourceRecord; error: unknown }> = [];
  const { db, kafka, names, groupId, worker } = useWorker({
    deps: {
      onFailure: async (record, error) => {
        failures.push({ record, error });
        return 'handled';
      },
    },
  });

  const stale42 = themeEvent(T, 'stale', 42);
  const stale41 = themeEvent(T, 'stale', 41);
  const twice = themeEvent(T, 'twice', 7);
  const del50 = themeEvent(T, 'deleted', 50, { event_type: 'theme.deleted' });
  const late49 = themeEvent(T, 'deleted', 49);
  const updated2 = themeEvent(T, 'order', 2);
  const created1 = themeEvent(T, 'order', 1, { event_type: 'theme.created' });
  const original = themeEvent(T, 'anomaly', 3);
  const forged = { ...original, data: { ...original.data!, name: 'Not The Same' } };
  const first = themeEvent(T, 'idem', 5, { idempotency_key: 'order-123' });
  const republished = themeEvent(T, 'idem', 6, { idempotency_key: 'order-123' });
  const gapFrom = themeEvent(T, 'gap', 1);
  const gapTo = themeEvent(T, 'gap', 5);

  beforeAll(async () => {
    const events = [
      raw(stale42),
      raw(stale41),
      raw(twice),
      raw(twice),
      raw(del50),
      raw(late49),
      raw(updated2),
      raw(created1),
      raw(original),
      raw(forged),
      raw(first),
      raw(republished),
      raw(gapFrom),
      raw(gapTo),
      { key: `${T}/theme/broken`, value: '{"event_id":"x","event_version":1}' },
    ];
    await produce(kafka, names.events, events);
    await eventually(() => groupCaughtUp(kafka, groupId, names.events), { message: 'worker caught up' });
    await eventually(() => outboxDrained(db.pool), { message: 'outbox drained' });
  });

  it('v42 then v41: v41 is stale and v42 stays', async () => {
    expect((await stateOf(db.pool, T, 'stale'))?.version).toBe(42);
    expect(await inboxStatus(db.pool, stale41.event_id)).toMatchObject({ status: 'stale', reason: 'stored version 42' });
  });

  it('the same delivery twice: applied once, the second is a duplicate (no second inbox row)', async () => {
    expect(await inboxStatus(db.pool, twice.event_id)).toMatchObject({ status: 'applied' });
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM applied_outbox WHERE event_id = $1', [twice.event_id]);
    expect(rows[0].n).toBe(1);
  });

  it('delete v50 then a late update v49: stays deleted, the tombstone keeps version 50', async () => {
    const state = await stateOf(db.pool, T, 'deleted');
    expect(state).toMatchObject({ version: 50, deleted: true, data: null });
    expect(await inboxStatus(db.pool, late49.event_id)).toMatchObject({ status: 'stale' });
  });

  it('updated before created: the highest version wins', async () => {
    expect((await stateOf(db.pool, T, 'order'))?.version).toBe(2);
    expect(await inboxStatus(db.pool, created1.event_id)).toMatchObject({ status: 'stale' });
  });

  it('same event_id, different body: quarantined, the second body kept as an anomaly', async () => {
    expect(await inboxStatus(db.pool, original.event_id)).toMatchObject({ status: 'applied' });
    const { rows } = await db.pool.query('SELECT payload, status FROM inbox_anomalies WHERE event_id = $1', [original.event_id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].status).toBe('quarantined');
    expect(JSON.parse(rows[0].payload).data.name).toBe('Not The Same');
    expect((await stateOf(db.pool, T, 'anomaly'))?.data).toMatchObject({ name: original.data!['name'] });
  });

  it('an idempotency_key re-published under a new event_id: duplicate, state unchanged', async () => {
    expect(await inboxStatus(db.pool, republished.event_id)).toEqual({
      status: 'duplicate',
      reason: 'idempotency_key',
      duplicate_of: first.event_id,
    });
    expect((await stateOf(db.pool, T, 'idem'))?.version).toBe(5);
  });

  it('an invalid envelope goes to onFailure as a permanent error and the partition keeps flowing', async () => {
    expect(failures).toHaveLength(1);
    expect(failures[0]!.error).toMatchObject({ code: 'invalid_envelope', retryable: false });
  });

  it('publishes applied records in order with key and headers', async () => {
    const applied = await readTopic(kafka, names.applied);
    const byKey = new Map<string, number[]>();
    for (const r of applied) byKey.set(r.key, [...(byKey.get(r.key) ?? []), JSON.parse(r.value.toString()).resource.version]);
    expect(Object.fromEntries(byKey)).toEqual({
      [`${T}/theme/stale`]: [42],
      [`${T}/theme/twice`]: [7],
      [`${T}/theme/deleted`]: [50],
      [`${T}/theme/order`]: [2],
      [`${T}/theme/anomaly`]: [3],
      [`${T}/theme/idem`]: [5],
      [`${T}/theme/gap`]: [1, 5],
    });
    const deleted = applied.find((r) => r.key === `${T}/theme/deleted`)!;
    const record = JSON.parse(deleted.value.toString());
    expect(record).toEqual({
      event_id: del50.event_id,
      tenant_id: T,
      resource: { type: 'theme', id: 'deleted', version: 50 },
      action: 'delete',
      data: null,
      occurred_at: del50.occurred_at,
      applied_at: expect.any(String),
    });
    expect(deleted.headers).toMatchObject({ 'event-id': del50.event_id, 'source-topic': names.events });
    expect(Number(deleted.headers['source-offset'])).toBeGreaterThanOrEqual(0);
    expect(deleted.headers['source-partition']).toBe(String(deleted.partition));
  });

  it('counts outcomes, duplicates, stale events and version gaps', async () => {
    const text = await worker.registry.metrics();
    const value = (line: string) => Number(new RegExp(`^${line.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
    expect(value('webhook_events_processed_total{outcome="applied"}')).toBe(8);
    expect(value('webhook_events_processed_total{outcome="stale"}')).toBe(3);
    expect(value('webhook_events_processed_total{outcome="quarantined"}')).toBe(1);
    expect(value('webhook_events_processed_total{outcome="invalid"}')).toBe(1);
    expect(value('webhook_duplicates_total')).toBe(2);
    expect(value('webhook_stale_events_total')).toBe(3);
    expect(value('webhook_version_gaps_total')).toBe(1);
    expect(value('webhook_outbox_age_seconds')).toBe(0);
    expect(text).toMatch(/webhook_queue_lag\{partition="\d+"\} 0/);
  });

  it('serves /healthz and /readyz on the admin port', async () => {
    const health = await fetch(`http://127.0.0.1:${worker.adminPort}/healthz`);
    expect(health.status).toBe(200);
    const ready = await fetch(`http://127.0.0.1:${worker.adminPort}/readyz`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { checks: Record<string, unknown> }).checks).toMatchObject({ outbox_relay: true, database: true });
  });

  it('is not ready once its outbox relay is gone (runs last: it stops the relay)', async () => {
    await worker.relay.stop();
    const ready = await fetch(`http://127.0.0.1:${worker.adminPort}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: Record<string, unknown> }).checks).toMatchObject({ outbox_relay: false });
  });
});
