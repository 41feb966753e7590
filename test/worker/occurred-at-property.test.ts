import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import { resourceKey, type ReceivedEnvelope } from '#domain/contract/index.ts';
import { occurredAtMicros } from '#domain/contract/occurred-at.ts';
import { readTopic } from '../kit/kafka.ts';
import { groupCaughtUp, outboxDrained, themeEvent, useWorker } from '../kit/worker.ts';
import { eventually } from '../kit/eventually.ts';

// Seed 002's fallback ordering: a source that orders a resource type by occurred_at. Shuffled,
// duplicated histories with ties (several events at one instant, written in other zones too) must
// end, per resource, at the newest instant: the first of its events to arrive (a tie is stale),
// a tombstone if that one is a delete. A fresh seed each run, printed; PROPERTY_SEED replays one.
const SEED = process.env.PROPERTY_SEED === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.PROPERTY_SEED);
console.log(`occurred-at-property: seed ${SEED} (replay with PROPERTY_SEED=${SEED})`);

const BASE_MS = Date.parse('2026-06-16T10:00:00Z');

// One resource's history: events at a few instants (so ties are common), microseconds apart at
// times, each an update or a delete, maybe carrying a version that means nothing to the order.
const stepArb = fc.record({
  second: fc.integer({ min: 0, max: 6 }),
  micros: fc.constantFrom(0, 0, 1, 999_999),
  deleted: fc.boolean(),
  copies: fc.integer({ min: 1, max: 3 }),
  version: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
  // Written as UTC or at +07:00: the same instant either way.
  zone: fc.constantFrom('Z', '+07:00'),
  // Without a version, the ordered-by header is optional: an envelope without one is ordered by time anyway.
  header: fc.boolean(),
});
const scenarioArb = fc.record({
  histories: fc.array(fc.array(stepArb, { minLength: 1, maxLength: 8 }), { minLength: 5, maxLength: 20 }),
  order: fc.infiniteStream(fc.double({ min: 0, max: 1, noNaN: true })),
});

function occurredAt(second: number, micros: number, zone: string): string {
  const shift = zone === 'Z' ? 0 : 7 * 3600_000;
  const wall = new Date(BASE_MS + second * 1000 + shift).toISOString().slice(0, 19);
  return `${wall}.${String(micros).padStart(6, '0')}${zone}`;
}

interface Delivery {
  sortKey: number;
  envelope: ReceivedEnvelope;
  header: boolean;
}

describe('worker: occurred_at-ordered apply under shuffled, duplicated delivery with ties (fast-check)', () => {
  const { db, kafka, names, groupId } = useWorker({
    topics: { eventsPartitions: 4 },
    config: { batchSize: 16 },
    deps: { adminServer: false },
  });
  let run = 0;

  it("ends at each resource's newest instant (the first to arrive of a tie), its tombstone included; applied times strictly increase per key", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async ({ histories, order }) => {
        // Each run uses its own tenant on the same topic and database, so runs never interfere.
        const tenant = `time${(run += 1)}`;
        const deliveries: Delivery[] = [];
        histories.forEach((history, r) => {
          history.forEach((step, s) => {
            const envelope: ReceivedEnvelope = themeEvent(tenant, `res${r}`, step.version ?? 0, {
              event_id: `evt_${tenant}_${r}_${s}`,
              occurred_at: occurredAt(step.second, step.micros, step.zone),
              ...(step.deleted ? { event_type: 'theme.deleted' } : {}),
            });
            if (step.version === undefined) delete envelope.resource.version;
            const header = step.header || step.version !== undefined;
            for (let c = 0; c < step.copies; c += 1) deliveries.push({ sortKey: order.next().value, envelope, header });
          });
        });
        deliveries.sort((a, b) => a.sortKey - b.sortKey);

        // The expected winner per resource: the newest instant; of several there, the first delivered.
        const winner = new Map<string, ReceivedEnvelope>();
        for (const { envelope } of deliveries) {
          const current = winner.get(envelope.resource.id);
          if (!current || occurredAtMicros(envelope.occurred_at) > occurredAtMicros(current.occurred_at))
            winner.set(envelope.resource.id, envelope);
        }

        const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
        await producer.connect();
        try {
          // As the ingress writes them: keyed by resource, `ordered-by: occurred_at` for this source's type.
          await producer.send({
            topic: names.events,
            acks: -1,
            messages: deliveries.map((d) => ({
              key: resourceKey(d.envelope),
              value: JSON.stringify(d.envelope),
              ...(d.header ? { headers: { 'ordered-by': 'occurred_at' } } : {}),
            })),
          });
        } finally {
          await producer.disconnect();
        }
        await eventually(() => groupCaughtUp(kafka, groupId, names.events), { message: 'caught up' });
        await eventually(() => outboxDrained(db.pool), { message: 'outbox drained' });

        const { rows } = await db.pool.query<{
          resource_id: string;
          version: string | null;
          last_occurred_us: string;
          deleted: boolean;
          data: unknown;
          last_event_id: string;
        }>(
          `SELECT resource_id, version, (extract(epoch FROM last_occurred_at) * 1000000)::bigint::text AS last_occurred_us,
             deleted, data, last_event_id
           FROM resource_state WHERE tenant_id = $1`,
          [tenant],
        );
        expect(rows).toHaveLength(winner.size);
        for (const row of rows) {
          const want = winner.get(row.resource_id)!;
          expect(row.last_event_id).toBe(want.event_id);
          expect(BigInt(row.last_occurred_us)).toBe(occurredAtMicros(want.occurred_at));
          expect(row.version === null ? undefined : Number(row.version)).toBe(want.resource.version);
          expect(row.deleted).toBe(want.event_type === 'theme.deleted');
          expect(row.data).toEqual(want.event_type === 'theme.deleted' ? null : want.data);
        }

        const applied = (await readTopic(kafka, names.applied)).filter((r) => r.key.startsWith(`${tenant}/`));
        const times = new Map<string, bigint[]>();
        for (const r of applied) {
          const value = JSON.parse(r.value.toString()) as { ordered_by?: string; occurred_at: string };
          expect(value.ordered_by).toBe('occurred_at');
          times.set(r.key, [...(times.get(r.key) ?? []), occurredAtMicros(value.occurred_at)]);
        }
        for (const [id, want] of winner) {
          const seen = times.get(`${tenant}/theme/${id}`) ?? [];
          for (let i = 1; i < seen.length; i += 1) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!);
          expect(seen.at(-1)).toBe(occurredAtMicros(want.occurred_at));
        }
      }),
      { seed: SEED, numRuns: 8, endOnFailure: true },
    );
  });
});
