import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { EventEnvelope } from '#domain/contract/index.ts';
import { readTopic } from '../kit/kafka.ts';
import { groupCaughtUp, outboxDrained, produce, raw, themeEvent, useWorker } from '../kit/worker.ts';
import { appliedLedgerProblems } from '../kit/ledger.ts';
import { eventually } from '../kit/eventually.ts';

// A fresh seed each run, printed; FC_SEED=<n> replays a failing one.
const SEED = process.env.FC_SEED === undefined ? Date.now() ^ (Math.random() * 0x7fffffff) : Number(process.env.FC_SEED);

// One resource's history: distinct versions, each an update or a delete, delivered 1-3 times each.
const historyArb = fc.uniqueArray(
  fc.record({ version: fc.integer({ min: 1, max: 40 }), deleted: fc.boolean(), copies: fc.integer({ min: 1, max: 3 }) }),
  { minLength: 1, maxLength: 8, selector: (h) => h.version },
);
const scenarioArb = fc.record({
  histories: fc.array(historyArb, { minLength: 5, maxLength: 25 }),
  order: fc.infiniteStream(fc.double({ min: 0, max: 1, noNaN: true })),
});

describe('worker: version-guarded apply under shuffled, duplicated delivery (fast-check)', () => {
  const { db, kafka, names, groupId } = useWorker({
    topics: { eventsPartitions: 4 },
    config: { batchSize: 16 },
    deps: { adminServer: false },
  });
  let run = 0;

  it("ends at each resource's highest version (or its tombstone); applied versions strictly increase per key", async () => {
    console.log(`[version-property] seed ${SEED} (replay: FC_SEED=${SEED})`);
    await fc.assert(
      fc.asyncProperty(scenarioArb, async ({ histories, order }) => {
        // Each run uses its own tenant on the same topic and database, so runs never interfere.
        const tenant = `prop${(run += 1)}`;
        const latest = new Map<string, EventEnvelope>();
        const deliveries: Array<{ sortKey: number; envelope: EventEnvelope }> = [];
        histories.forEach((history, r) => {
          for (const step of history) {
            const envelope = themeEvent(tenant, `res${r}`, step.version, step.deleted ? { event_type: 'theme.deleted' } : {});
            const current = latest.get(`res${r}`);
            if (!current || current.resource.version < step.version) latest.set(`res${r}`, envelope);
            for (let c = 0; c < step.copies; c += 1) deliveries.push({ sortKey: order.next().value, envelope });
          }
        });
        deliveries.sort((a, b) => a.sortKey - b.sortKey);
        await produce(
          kafka,
          names.events,
          deliveries.map((d) => raw(d.envelope)),
        );
        await eventually(() => groupCaughtUp(kafka, groupId, names.events), { message: 'caught up' });
        await eventually(() => outboxDrained(db.pool), { message: 'outbox drained' });

        const { rows } = await db.pool.query<{
          resource_id: string;
          version: string;
          deleted: boolean;
          data: unknown;
          last_event_id: string;
        }>('SELECT resource_id, version, deleted, data, last_event_id FROM resource_state WHERE tenant_id = $1', [tenant]);
        expect(rows).toHaveLength(latest.size);
        for (const row of rows) {
          const want = latest.get(row.resource_id)!;
          expect(Number(row.version)).toBe(want.resource.version);
          expect(row.deleted).toBe(want.event_type === 'theme.deleted');
          expect(row.data).toEqual(want.event_type === 'theme.deleted' ? null : want.data);
          expect(row.last_event_id).toBe(want.event_id);
        }

        const applied = (await readTopic(kafka, names.applied)).filter((r) => r.key.startsWith(`${tenant}/`));
        const versions = new Map<string, number[]>();
        for (const r of applied) {
          const version = (JSON.parse(r.value.toString()) as { resource: { version: number } }).resource.version;
          versions.set(r.key, [...(versions.get(r.key) ?? []), version]);
        }
        for (const [id, want] of latest) {
          const seen = versions.get(`${tenant}/theme/${id}`) ?? [];
          for (let i = 1; i < seen.length; i += 1) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!);
          expect(seen.at(-1)).toBe(want.resource.version);
        }
        // Every applied event so far (all runs) has its record, the last one per key is the state.
        expect(await appliedLedgerProblems({ pool: db.pool, kafka, appliedTopic: names.applied, accepted: [] })).toEqual([]);
      }),
      { seed: SEED, numRuns: 10, endOnFailure: true },
    );
  });
});
