import { describe, expect, it } from 'vitest';
import { defaultFailureSettings } from '#domain/failures/index.ts';
import { ensureTopics, topicSpecs } from '#plumbing/kafka/topics.ts';
import { readTopic } from '../kit/kafka.ts';
import { groupCaughtUp, produce, raw, stateOf, themeEvent, useWorker } from '../kit/worker.ts';
import { eventually, sleep } from '../kit/eventually.ts';

const T = 'tenant_dlq_down';

// Regression: a record whose DLQ produce fails must not have its offset committed (it would be lost).
describe('failures: producing to the DLQ fails', () => {
  const { db, kafka, names, settings, groupId } = useWorker({
    topics: { eventsPartitions: 1 },
    config: (names) => ({ retryLevels: names.retries.length, failures: { ...defaultFailureSettings, produceTimeoutMs: 1_500 } }),
    beforeStart: async () => {
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [names.dlq] });
      await admin.disconnect();
    },
  });

  it('does not commit the offset, and delivers the record to the DLQ once it can', async () => {
    const key = `${T}/theme/blocked`;
    const poison = '{"not": "an envelope"}';
    await produce(kafka, names.events, [raw(themeEvent(T, 'blocked', 1)), { key, value: poison }, raw(themeEvent(T, 'blocked', 2))]);
    // The three share one chunk transaction, so both valid events are applied; the offsets are
    // resolved in order, so nothing from the poison record on may be committed.
    await eventually(async () => (await stateOf(db.pool, T, 'blocked'))?.version === 2, { message: 'valid events applied' });
    await sleep(4_000);
    const admin0 = kafka.admin();
    await admin0.connect();
    const [committed] = await admin0.fetchOffsets({ groupId, topics: [names.events] });
    await admin0.disconnect();
    expect(Number(committed!.partitions[0]!.offset)).toBeLessThanOrEqual(1); // the poison is offset 1

    const admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, topicSpecs(settings), 1);
    await admin.disconnect();

    await eventually(() => groupCaughtUp(kafka, groupId, names.events), { timeoutMs: 90_000, message: 'caught up once the DLQ exists' });
    expect((await stateOf(db.pool, T, 'blocked'))?.version).toBe(2);
    const dlq = await eventually(
      async () => {
        const records = await readTopic(kafka, names.dlq);
        return records.length > 0 ? records : undefined;
      },
      { message: 'poison in the DLQ' },
    );
    expect(dlq.every((r) => r.value.toString() === poison && r.headers['dlq-reason'] === 'invalid_envelope')).toBe(true);
  }, 150_000);
});
