import { beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { memberTopics } from '#plumbing/kafka/groups.ts';
import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import { resourceKey, sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';
import { createTestTopics, testBrokers, testKafka, useTestAdmin } from '../kit/kafka.ts';
import { useTestDatabase } from '../kit/db.ts';
import { uniqueName } from '../kit/names.ts';
import { bridgeEnv, runBridge, type BridgeRun } from '../kit/run-bridge.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { ingressHeaders } from '../kit/ingress.ts';

const tenant = 'tenant_acme';
const RECORDS = 600;

function ingressRecord(event: EventEnvelope) {
  const body = JSON.stringify(event);
  return {
    key: resourceKey(event),
    value: body,
    headers: ingressHeaders(event, body),
  };
}

/** The reprocess command's throwaway group reading `topic` (other files may run their own at once). */
async function reprocessGroupOf(admin: Admin, topic: string): Promise<string | undefined> {
  const candidates = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.startsWith('bridge-cli-reprocess-'));
  if (candidates.length === 0) return undefined;
  const { groups } = await admin.describeGroups(candidates);
  return groups.find((g) => g.members.some((m) => memberTopics(m.memberMetadata).includes(topic)))?.groupId;
}

describe('bridge reprocess counts exactly and marks a partition done only when all of it applied', () => {
  const kafka = testKafka();
  const admin = useTestAdmin(kafka);
  const db = useTestDatabase();
  let env: Record<string, string>;
  let events: string;
  let produced: EventEnvelope[];

  beforeAll(async () => {
    const { settings, names } = await createTestTopics(kafka, { eventsPartitions: 1 });
    events = names.events;
    env = bridgeEnv({ brokers: testBrokers(), databaseUrl: db.url, events: settings.events, applied: settings.applied, partitions: 1 });
    produced = Array.from({ length: RECORDS }, (_, i) =>
      sampleThemeEvent({ tenant_id: tenant, resource: { id: `${uniqueName('thm')}-${i}`, version: 1 } }),
    );
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await producer.send({ topic: events, acks: -1, messages: produced.map(ingressRecord) });
    await producer.disconnect();
  });

  const wipe = () => db.pool.query('TRUNCATE inbox_events, resource_state, applied_outbox, inbox_anomalies');

  it('a rebalance of its group in the middle of a batch: every record applied once, counts exact', async () => {
    await wipe();
    // Hold the apply of the chunk holding record 300 (the apply path takes each key's advisory lock).
    const blocker = new pg.Client({ connectionString: db.url });
    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 7261))', [resourceKey(produced[300]!)]);
    let intruder: ReturnType<Kafka['consumer']> | undefined;
    let groupId: string | undefined;
    try {
      const running: Promise<BridgeRun> = runBridge(['reprocess', '--topic', events, '--from', '0', '--json'], env, 120_000);
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`,
          );
          return rows[0]!.n > 0;
        },
        { message: 'the reprocess blocked on the held chunk' },
      );
      const applied = (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM inbox_events')).rows[0]!.n;
      expect(applied).toBeGreaterThan(0);
      groupId = await reprocessGroupOf(admin, events);
      expect(groupId).toBeDefined();

      // A second member joins the throwaway group (and leaves once it has joined): the CLI's
      // consumer learns of the rebalance at its next heartbeat, after the held chunk.
      intruder = kafka.consumer({ groupId: groupId!, sessionTimeout: 10_000, heartbeatInterval: 1000 });
      const joined = new Promise<void>((resolve) => intruder!.on(intruder!.events.GROUP_JOIN, () => resolve()));
      await intruder.connect();
      await intruder.subscribe({ topic: events, fromBeginning: true });
      // run() resolves once the intruder has joined, which waits for the CLI's consumer to rejoin.
      const intruding = intruder.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: async () => {} });
      // Past the CLI consumer's heartbeat interval (3 s), so the heartbeat after the chunk goes out;
      // within the apply's lock timeout (5 s), so the held chunk applies at its first attempt.
      await sleep(3500);
      await blocker.query('COMMIT');
      await intruding;
      await joined;
      await intruder.disconnect();
      intruder = undefined;

      const run = await running;
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.json()).toMatchObject({
        records: RECORDS,
        outcomes: { applied: RECORDS, stale: 0, duplicate: 0, duplicate_version: 0, quarantined: 0, invalid: 0 },
        partitions: [{ partition: 0, from: '0', to: String(RECORDS), records: RECORDS }],
      });
      const { rows } = await db.pool.query<{ n: number; applied: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE status = 'applied')::int AS applied FROM inbox_events`,
      );
      expect(rows[0]).toEqual({ n: RECORDS, applied: RECORDS });
    } finally {
      await blocker.end().catch(() => {});
      await intruder?.disconnect().catch(() => {});
      // The command deletes its group; when this test failed part-way the intruder may have kept it alive.
      if (groupId) await admin.deleteGroups([groupId]).catch(() => {});
    }
  }, 180_000);

  it('an apply that keeps failing stops the command at once with the offset to rerun from and exact counts', async () => {
    await wipe();
    const failing = produced[250]!;
    await db.pool.query(`
      CREATE OR REPLACE FUNCTION test_refuse_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.event_id = '${failing.event_id}' THEN RAISE EXCEPTION 'injected failure for %', NEW.event_id; END IF;
        RETURN NEW;
      END $$`);
    await db.pool.query('CREATE TRIGGER test_refuse_event BEFORE INSERT ON inbox_events FOR EACH ROW EXECUTE FUNCTION test_refuse_event()');
    try {
      const run = await runBridge(['reprocess', '--topic', events, '--from', '0', '--json'], env, 120_000);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      const error = JSON.parse(run.stderr) as {
        error: string;
        details: { partition: number; offset: string; outcomes: Record<string, number> };
      };
      // The cause itself, from the command's own attempts: not a watchdog's "no progress" after the
      // batch was retried behind its back (the 120 s above only guards liveness).
      expect(error.error).toMatch(
        /^applying .*\/0 from offset 200 failed 3 times: injected failure for .*; records before it were applied; rerun from that offset/,
      );
      expect(error.details).toMatchObject({ partition: 0, offset: '200', outcomes: { applied: 200, duplicate: 0 } });
      const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM inbox_events');
      expect(rows[0]!.n).toBe(200);
    } finally {
      await db.pool.query('DROP TRIGGER IF EXISTS test_refuse_event ON inbox_events');
    }
  }, 180_000);
});
