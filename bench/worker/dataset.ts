import type { SourceRecord } from '#domain/apply/types.ts';
import { resourceKey, sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';

export interface BenchEvent {
  key: string;
  value: string;
}

export interface Dataset {
  events: BenchEvent[];
  duplicates: number;
  stale: number;
}

/**
 * `resources` resources x 10 deliveries each: 8 fresh versions (2, 4, ... 16), one exact
 * redelivery of an earlier event (10% duplicates) and one event whose version is one below the
 * resource's current maximum (10% stale). Deliveries are interleaved across resources in rounds,
 * so every fetched batch mixes many resources. Seeded: every run produces the same shape.
 */
export function buildDataset(resources: number, seed = 7): Dataset {
  let state = seed;
  const rand = () => (state = (state * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const perResource: BenchEvent[][] = [];
  for (let r = 0; r < resources; r += 1) {
    const fresh: EventEnvelope[] = [];
    for (let i = 1; i <= 8; i += 1) {
      fresh.push(
        sampleThemeEvent({
          event_id: `evt_bench_${r}_${i}`,
          tenant_id: `tenant${r % 50}`,
          occurred_at: '2026-11-29T00:00:00.000Z',
          resource: { id: `theme_${r}`, version: 2 * i },
        }),
      );
    }
    const sequence: EventEnvelope[] = [...fresh];
    const dupAt = 1 + Math.floor(rand() * 8); // a redelivery of an event already sent
    sequence.splice(dupAt, 0, fresh[Math.floor(rand() * dupAt)]!);
    const staleAt = 3 + Math.floor(rand() * 7); // at least two fresh versions before it
    const maxBefore = Math.max(...sequence.slice(0, staleAt).map((e) => e.resource.version));
    sequence.splice(
      staleAt,
      0,
      sampleThemeEvent({
        event_id: `evt_bench_${r}_stale`,
        tenant_id: `tenant${r % 50}`,
        occurred_at: '2026-11-29T00:00:00.000Z',
        resource: { id: `theme_${r}`, version: maxBefore - 1 },
      }),
    );
    perResource.push(sequence.map((e) => ({ key: resourceKey(e), value: JSON.stringify(e) })));
  }
  const events: BenchEvent[] = [];
  for (let round = 0; round < 10; round += 1) for (const seq of perResource) if (seq[round]) events.push(seq[round]!);
  return { events, duplicates: resources, stale: resources };
}

export interface LaneOptions {
  topic: string;
  partitions: number;
  batchSize: number;
  /** The partition each key is on. */
  partitionOf: (key: string) => number;
}

/**
 * The events as the worker's consumer sees them, for a ceiling that feeds the apply path straight:
 * per partition (a lane), its records in offset order, in chunks of the worker's batch size.
 */
export function partitionLanes(events: readonly BenchEvent[], options: LaneOptions): SourceRecord[][][] {
  const now = String(Date.now());
  const perPartition: SourceRecord[][] = Array.from({ length: options.partitions }, () => []);
  for (const e of events) {
    const partition = options.partitionOf(e.key);
    const list = perPartition[partition]!;
    list.push({
      topic: options.topic,
      partition,
      offset: String(list.length),
      key: e.key,
      value: Buffer.from(e.value),
      timestamp: now,
      headers: {},
    });
  }
  return perPartition.map((records) => {
    const chunks: SourceRecord[][] = [];
    for (let i = 0; i < records.length; i += options.batchSize) chunks.push(records.slice(i, i + options.batchSize));
    return chunks;
  });
}
