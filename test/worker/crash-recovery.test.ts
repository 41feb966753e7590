import type { ChildProcess } from 'node:child_process';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Kafka } from '#plumbing/kafka/types.ts';
import type { CrashPoint } from '#services/worker/crash-points.ts';
import { COUNT_UNPUBLISHED_OUTBOX } from '#domain/store/outbox.ts';
import type { EventEnvelope } from '#domain/contract/index.ts';
import { createTestDatabase, type TestDatabase } from '../kit/db.ts';
import { testBrokers, testKafka, createTestTopics, readTopic } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { groupCaughtUp, outboxDrained, produce, raw, themeEvent } from '../kit/worker.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { eventually } from '../kit/eventually.ts';

const children = new Set<ChildProcess>();

function spawnWorker(env: Record<string, string>): ServiceProcess {
  const worker = spawnService('worker', { ...process.env, ...env });
  children.add(worker.child);
  void worker.exited.then(() => children.delete(worker.child));
  return worker;
}

afterEach(() => {
  for (const child of children) child.kill('SIGKILL');
});

// Deliveries with duplicates and stale versions, in a fixed pseudo-random order.
function scenario(tenant: string): { deliveries: EventEnvelope[]; latest: Map<string, EventEnvelope> } {
  let seed = 42;
  const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const latest = new Map<string, EventEnvelope>();
  const deliveries: Array<{ at: number; e: EventEnvelope }> = [];
  for (let r = 0; r < 30; r += 1) {
    for (let v = 1; v <= 8; v += 1) {
      const e = themeEvent(tenant, `res${r}`, v, v === 8 && r % 5 === 0 ? { event_type: 'theme.deleted' } : {});
      latest.set(`res${r}`, e);
      deliveries.push({ at: rand(), e });
      if (rand() < 0.2) deliveries.push({ at: rand(), e });
    }
  }
  deliveries.sort((a, b) => a.at - b.at);
  return { deliveries: deliveries.map((d) => d.e), latest };
}

describe('worker: kill -9 between durable steps, then restart', () => {
  const dbs: TestDatabase[] = [];
  afterAll(async () => {
    for (const db of dbs) await db.drop();
  });

  const cases: Array<{ point: CrashPoint; after: number }> = [
    { point: 'after-commit-before-offset', after: 3 },
    { point: 'after-commit-before-publish', after: 2 },
    { point: 'after-publish-before-mark', after: 2 },
  ];

  for (const { point, after } of cases) {
    it(`${point}: state identical, no applied record missing, repeats byte-identical`, async () => {
      const db = await createTestDatabase();
      dbs.push(db);
      const kafka: Kafka = testKafka();
      const { names } = await createTestTopics(kafka);
      const tenant = uniqueName('crash').replace(/-/g, '_');
      const { deliveries, latest } = scenario(tenant);
      await produce(kafka, names.events, deliveries.map(raw));

      const groupId = uniqueName('theme-applier');
      const env = {
        KAFKA_BROKERS: testBrokers().join(','),
        DATABASE_URL: db.url,
        TOPIC_EVENTS: names.events,
        TOPIC_APPLIED: names.applied,
        CONSUMER_GROUP: groupId,
        ADMIN_PORT: '0',
        LOG_LEVEL: 'warn',
        WORKER_BATCH_SIZE: '10',
        WORKER_SESSION_TIMEOUT_MS: '6000',
        RELAY_BATCH_SIZE: '25',
      };

      const crashing = spawnWorker({ ...env, WORKER_CRASH_AT: point, WORKER_CRASH_AFTER: String(after) });
      const crash = await Promise.race([
        crashing.exited,
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no crash:\n${crashing.output()}`)), 60_000)),
      ]);
      expect(crash.signal, crashing.output()).toBe('SIGKILL');

      const before = await db.pool.query<{ applied: number; unpublished: number; published: number }>(
        `SELECT (SELECT count(*)::int FROM inbox_events WHERE status = 'applied') AS applied,
                (${COUNT_UNPUBLISHED_OUTBOX}) AS unpublished,
                (SELECT count(*)::int FROM applied_outbox) - (${COUNT_UNPUBLISHED_OUTBOX}) AS published`,
      );
      expect(before.rows[0]!.applied).toBeGreaterThan(0);
      if (point === 'after-commit-before-offset') {
        // The crash window was really hit: a committed transaction whose offset is not committed.
        const admin = kafka.admin();
        await admin.connect();
        const [committed] = await admin.fetchOffsets({ groupId, topics: [names.events] });
        await admin.disconnect();
        const { rows } = await db.pool.query<{ source_partition: number; max: string }>(
          'SELECT source_partition, max(source_offset) AS max FROM inbox_events GROUP BY source_partition',
        );
        const ahead = rows.some((r) => {
          const c = committed!.partitions.find((p) => p.partition === r.source_partition);
          return Number(r.max) >= Number(c?.offset ?? -1);
        });
        expect(ahead).toBe(true);
      } else {
        expect(before.rows[0]!.unpublished).toBeGreaterThan(0);
      }

      const restarted = spawnWorker(env);
      try {
        await eventually(() => groupCaughtUp(kafka, groupId, names.events), { timeoutMs: 90_000, message: 'caught up after restart' });
        await eventually(() => outboxDrained(db.pool), { timeoutMs: 60_000, message: 'outbox drained after restart' });
      } catch (error) {
        throw new Error(`${(error as Error).message}\n${restarted.output()}`);
      }
      restarted.child.kill('SIGTERM');
      expect((await restarted.exited).code, restarted.output()).toBe(0);

      // State identical to what an uninterrupted run must produce.
      const state = await db.pool.query<{ resource_id: string; version: string; deleted: boolean; last_event_id: string }>(
        'SELECT resource_id, version, deleted, last_event_id FROM resource_state WHERE tenant_id = $1',
        [tenant],
      );
      expect(state.rows).toHaveLength(latest.size);
      for (const row of state.rows) {
        const want = latest.get(row.resource_id)!;
        expect([Number(row.version), row.deleted, row.last_event_id]).toEqual([
          want.resource.version,
          want.event_type === 'theme.deleted',
          want.event_id,
        ]);
      }

      // Every event was applied at most once, and every applied event reached the applied topic.
      const appliedInbox = await db.pool.query<{ event_id: string }>("SELECT event_id FROM inbox_events WHERE status = 'applied'");
      const outbox = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM applied_outbox');
      expect(outbox.rows[0]!.n).toBe(appliedInbox.rows.length);
      const records = await readTopic(kafka, names.applied);
      const byEvent = new Map<string, { value: string; headers: string }>();
      let repeats = 0;
      for (const r of records) {
        const eventId = r.headers['event-id']!;
        const seen = byEvent.get(eventId);
        const current = { value: r.value.toString('base64'), headers: JSON.stringify(r.headers) };
        if (seen) {
          repeats += 1;
          expect(current).toEqual(seen);
        } else byEvent.set(eventId, current);
      }
      expect([...byEvent.keys()].sort()).toEqual(appliedInbox.rows.map((r) => r.event_id).sort());
      // A kill at any other point may also land between a relay send and its mark, so only
      // the relay's own crash points pin the number of repeats.
      if (point === 'after-publish-before-mark') expect(repeats).toBeGreaterThan(0);
      if (point === 'after-commit-before-publish') expect(repeats).toBe(0);
    });
  }
});
