import { describe, expect, it } from 'vitest';
import { failureSettingsFrom, failuresEnv } from '#domain/failures/index.ts';
import { parseConfig } from '#plumbing/config/env.ts';
import { readTopic, topicRecordCount } from '../kit/kafka.ts';
import { groupCaughtUp, produce, raw, stateOf, themeEvent, inboxRow, metricValue, useWorker } from '../kit/worker.ts';
import { eventually } from '../kit/eventually.ts';

const T = 'tenant_retry';
// Shortened delays (real defaults: 5 s, 30 s, 2 min, 10 min), without jitter so timings are checkable.
const DELAYS = [400, 600, 800, 1000];

describe('failures: retry chain and DLQ against the real broker and Postgres', () => {
  const { db, kafka, names, groupId, worker } = useWorker({
    config: (names) => ({
      failures: failureSettingsFrom(
        parseConfig(failuresEnv, {
          RETRY_DELAYS_MS: DELAYS.join(','),
          RETRY_JITTER: '0',
          FAULT_INJECT: [
            `transient:${T}/theme/flaky:2`,
            `transient:${T}/theme/broken:100`,
            `permanent:${T}/theme/violates:1`,
            `transient:${T}/theme/superseded:1`,
          ].join(','),
        }),
      ),
      retryLevels: names.retries.length,
    }),
  });

  it('sends a poison record to the DLQ with its reason while the partition keeps flowing', async () => {
    const key = `${T}/theme/poison-neighbour`;
    const before = themeEvent(T, 'poison-neighbour', 1);
    const after = themeEvent(T, 'poison-neighbour', 2);
    const poison = '{"event_id":"evt_poison","event_version":1,'; // not even JSON
    const wrongVersion = JSON.stringify({ ...themeEvent(T, 'poison-neighbour', 3), event_version: 2 });
    // Same key, so the same partition: the records after the poison must still be applied.
    await produce(kafka, names.events, [raw(before), { key, value: poison }, { key, value: wrongVersion }, raw(after)]);

    await eventually(async () => (await stateOf(db.pool, T, 'poison-neighbour'))?.version === 2, { message: 'neighbour applied' });
    const dlq = await eventually(
      async () => {
        const records = (await readTopic(kafka, names.dlq)).filter((r) => r.key === key);
        return records.length >= 2 ? records : undefined;
      },
      { message: 'two DLQ records' },
    );
    const bodies = dlq.map((r) => r.value.toString());
    expect(bodies).toContain(poison); // byte for byte
    expect(bodies).toContain(wrongVersion);
    const byBody = new Map(dlq.map((r) => [r.value.toString(), r.headers]));
    expect(byBody.get(poison)!['dlq-reason']).toBe('invalid_json');
    expect(byBody.get(wrongVersion)!['dlq-reason']).toBe('unknown_event_version');
    for (const headers of byBody.values()) {
      expect(headers['retry-attempt']).toBe('1');
      expect(headers['retry-original-topic']).toBe(names.events);
      expect(headers['retry-original-offset']).toMatch(/^\d+$/);
      expect(headers['dlq-failed-topic']).toBe(names.events);
    }
    expect(await metricValue(worker.registry, 'dead_letter_total', { reason: 'invalid_json' })).toBe(1);
  });

  it('dead-letters a constraint violation at once, without retrying', async () => {
    const event = themeEvent(T, 'violates', 1);
    await produce(kafka, names.events, [raw(event)]);
    const record = await eventually(async () => (await readTopic(kafka, names.dlq)).find((r) => r.key === `${T}/theme/violates`), {
      message: 'DLQ record',
    });
    expect(record.headers['dlq-reason']).toBe('constraint_violation');
    expect(record.headers['retry-attempt']).toBe('1');
    expect(record.value.toString()).toBe(raw(event).value);
    expect(await inboxRow(db.pool, event.event_id)).toMatchObject({ status: 'dead_lettered', attempts: 1, reason: 'constraint_violation' });
  });

  it('retries a transient failure after its delay and applies it', async () => {
    const event = themeEvent(T, 'flaky', 7);
    const started = Date.now();
    await produce(kafka, names.events, [raw(event)]);
    await eventually(async () => (await stateOf(db.pool, T, 'flaky'))?.version === 7, { timeoutMs: 30_000, message: 'flaky applied' });
    const elapsed = Date.now() - started;
    // Two failures: through retry.1 (400 ms) and retry.2 (600 ms).
    expect(elapsed).toBeGreaterThanOrEqual(DELAYS[0]! + DELAYS[1]!);
    const row = await inboxRow(db.pool, event.event_id);
    expect(row).toMatchObject({ status: 'applied', attempts: 2 });
    expect(row!.last_error).toContain('serialization_failure');
    const retried = await readTopic(kafka, names.retries[0]!);
    const mine = retried.find((r) => r.key === `${T}/theme/flaky`)!;
    expect(mine.value.toString()).toBe(raw(event).value);
    expect(mine.headers['retry-attempt']).toBe('1');
    expect(mine.headers['retry-last-error-code']).toBe('serialization_failure');
    expect(Date.parse(mine.headers['retry-not-before']!) - Date.parse(mine.headers['retry-first-failure-at']!)).toBe(DELAYS[0]);
    expect((await readTopic(kafka, names.retries[1]!)).filter((r) => r.key === `${T}/theme/flaky`)).toHaveLength(1);
    expect(await topicRecordCount(kafka, names.retries[2]!)).toBe(0);
  });

  it('sends a failure that persists to the DLQ after 4 retries, with attempt 5 recorded', async () => {
    const event = themeEvent(T, 'broken', 3);
    await produce(kafka, names.events, [raw(event)]);
    const record = await eventually(async () => (await readTopic(kafka, names.dlq)).find((r) => r.key === `${T}/theme/broken`), {
      timeoutMs: 30_000,
      message: 'broken dead-lettered',
    });
    expect(record.headers).toMatchObject({
      'dlq-reason': 'retries_exhausted',
      'retry-attempt': '5',
      'retry-last-error-code': 'serialization_failure',
      'retry-original-topic': names.events,
      'dlq-failed-topic': names.retries[3],
    });
    expect(record.value.toString()).toBe(raw(event).value);
    for (const topic of names.retries) {
      expect((await readTopic(kafka, topic)).filter((r) => r.key === `${T}/theme/broken`)).toHaveLength(1);
    }
    expect(await inboxRow(db.pool, event.event_id)).toMatchObject({ status: 'dead_lettered', attempts: 5, reason: 'retries_exhausted' });
    expect(await stateOf(db.pool, T, 'broken')).toBeUndefined();
    expect(await metricValue(worker.registry, 'dead_letter_total', { reason: 'retries_exhausted' })).toBe(1);
    expect(await metricValue(worker.registry, 'webhook_retries_total', { attempt: '4' })).toBe(1);
  });

  it('resolves a failed event as stale, not retried, when its resource already holds a later version', async () => {
    await db.pool.query(
      `INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, deleted, data, last_event_id)
       VALUES ($1, 'theme', 'superseded', 9, false, '{}', 'evt_seed')`,
      [T],
    );
    const older = themeEvent(T, 'superseded', 4);
    // The injected fault fails the first attempt before the apply path could call it stale itself.
    await produce(kafka, names.events, [raw(older)]);
    await eventually(async () => (await inboxRow(db.pool, older.event_id))?.status === 'stale', { message: 'older resolved stale' });
    expect((await inboxRow(db.pool, older.event_id))!.reason).toContain('stored version 9');
    expect((await readTopic(kafka, names.retries[0]!)).filter((r) => r.key === `${T}/theme/superseded`)).toHaveLength(0);
    expect((await readTopic(kafka, names.dlq)).filter((r) => r.key === `${T}/theme/superseded`)).toHaveLength(0);
    expect(await metricValue(worker.registry, 'webhook_failures_resolved_stale_total')).toBe(1);
  });

  it('keeps the main group and every retry group caught up, and reports the retry lag', async () => {
    await eventually(() => groupCaughtUp(kafka, groupId, names.events), { message: 'main caught up' });
    for (const [i, topic] of names.retries.entries()) {
      await eventually(() => groupCaughtUp(kafka, `${groupId}.retry.${i + 1}`, topic), { message: `retry ${i + 1} caught up` });
    }
    await eventually(async () => (await metricValue(worker.registry, 'webhook_retry_waiting_events')) === 0, {
      message: 'lag gauge at zero',
    });
    expect(await metricValue(worker.registry, 'webhook_consumer_paused', { consumer: 'main' })).toBe(0);
  });
});
