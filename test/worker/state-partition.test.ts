import { describe, expect, it } from 'vitest';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { readTopic } from '../kit/kafka.ts';
import { groupCaughtUp, outboxDrained, produce, raw, themeEvent, useWorker } from '../kit/worker.ts';
import { eventually } from '../kit/eventually.ts';

const T = 'tenant_shard';
const PARTITIONS = 6;
const RESOURCES = 40;

// A store split by Kafka partition (docs/scaling.md) shards every table an apply writes on
// source_partition: it must be the resource's partition, the same on every row of a resource and
// on every topic of the bridge.
describe('every table an apply writes carries the resource key partition', () => {
  const { db, kafka, names, groupId } = useWorker({ topics: { eventsPartitions: PARTITIONS } });

  it('inbox, state, outbox and the applied record all carry murmur2(key) mod partitions; a row from before gets it on its next apply', async () => {
    // A state row from before migration 0013: no partition.
    await db.pool.query(
      `INSERT INTO resource_state (tenant_id, resource_type, resource_id, version, last_event_id, data) VALUES ($1, 'theme', 'sh_old', 1, 'evt_old', '{}')`,
      [T],
    );
    const events = [];
    for (let v = 1; v <= 3; v += 1) for (let r = 0; r < RESOURCES; r += 1) events.push(raw(themeEvent(T, `sh_r${r}`, v)));
    events.push(raw(themeEvent(T, 'sh_old', 2)));
    await produce(kafka, names.events, events);
    await eventually(async () => (await groupCaughtUp(kafka, groupId, names.events)) && (await outboxDrained(db.pool)), {
      timeoutMs: 60_000,
      message: 'applied and published',
    });

    const want = (id: string) => partitionForKey(`${T}/theme/${id}`, PARTITIONS);
    const state = await db.pool.query<{ resource_id: string; source_partition: number | null }>(
      'SELECT resource_id, source_partition FROM resource_state WHERE tenant_id = $1',
      [T],
    );
    expect(state.rows).toHaveLength(RESOURCES + 1);
    for (const row of state.rows) expect(row.source_partition, row.resource_id).toBe(want(row.resource_id));
    // More than one partition is in play, or the check proves little.
    expect(new Set(state.rows.map((r) => r.source_partition)).size).toBeGreaterThan(1);

    const inbox = await db.pool.query<{ resource_id: string; source_partition: number }>(
      'SELECT resource_id, source_partition FROM inbox_events WHERE tenant_id = $1',
      [T],
    );
    expect(inbox.rows).toHaveLength(3 * RESOURCES + 1);
    for (const row of inbox.rows) expect(row.source_partition, row.resource_id).toBe(want(row.resource_id));
    const outbox = await db.pool.query<{ key: string; source_partition: number }>(
      "SELECT key, source_partition FROM applied_outbox WHERE starts_with(key, $1 || '/')",
      [T],
    );
    for (const row of outbox.rows) expect(row.source_partition, row.key).toBe(partitionForKey(row.key, PARTITIONS));
    // The applied topic has the same partition count: each record sits on its row's partition.
    const records = await readTopic(kafka, names.applied);
    expect(records).toHaveLength(3 * RESOURCES + 1);
    for (const r of records) expect(r.partition, r.key).toBe(partitionForKey(r.key, PARTITIONS));
  });
});
