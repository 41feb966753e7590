import { beforeAll, describe, expect, it } from 'vitest';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import { resourceKey, sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';
import { createTestTopics, testBrokers, testKafka, useTestAdmin } from '../kit/kafka.ts';
import { useTestDatabase } from '../kit/db.ts';
import { uniqueName } from '../kit/names.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { ingressHeaders } from '../kit/ingress.ts';

const tenant = 'tenant_acme';

function themeEvent(id: string, version: number, extra: Partial<EventEnvelope> = {}): EventEnvelope {
  return sampleThemeEvent({
    tenant_id: tenant,
    ...extra,
    resource: { id, version },
    data: { ...sampleThemeEvent().data, name: `${id} v${version}` } as never,
  });
}

/** What the ingress produces: the raw body, keyed by resource, with its headers (and its trace, when tracing was on there). */
function ingressRecord(event: EventEnvelope, timestamp: number, body = JSON.stringify(event), traceparent?: string) {
  return {
    key: resourceKey(event),
    value: body,
    timestamp: String(timestamp),
    headers: { ...ingressHeaders(event, body, { receivedAt: new Date(timestamp) }), ...(traceparent === undefined ? {} : { traceparent }) },
  };
}

// Two of resource a's records carry a W3C trace context, as the ingress writes it with tracing on.
const TRACE_V2 = '0af7651916cd43dd8448eb211c80319c';
const TRACE_STALE = '4bf92f3577b34da6a3ce929d0e0e4736';
const traced = new Map<number, string>([
  [1, `00-${TRACE_V2}-b7ad6b7169203331-01`],
  [5, `00-${TRACE_STALE}-00f067aa0ba902b7-01`],
]);

const STATE = `SELECT version, deleted, data, last_event_id FROM resource_state WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`;
const INBOX = `SELECT event_id, status, resource_version, reason, body_sha256, payload, source_topic, source_partition, source_offset
  FROM inbox_events WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2 ORDER BY event_id`;

describe('bridge reprocess and trace (as a subprocess)', () => {
  const kafka = testKafka();
  const admin = useTestAdmin(kafka);
  const db = useTestDatabase();
  let env: Record<string, string>;
  let events: string;
  const group = uniqueName('theme-applier');
  const a = uniqueName('theme_a');
  const b = uniqueName('theme_b');
  const old = Date.now() - 3_600_000;
  const recent = Date.now() - 60_000;
  // Dated when the ingress received them: an occurred_at far ahead of received-at is dead-lettered.
  const aEvents = [1, 2, 3, 4, 5].map((v) => themeEvent(a, v, { occurred_at: new Date(old).toISOString() }));
  const aStale = themeEvent(a, 3, { occurred_at: new Date(old).toISOString() });
  const bEvents = [1, 2, 3].map((v) => themeEvent(b, v));
  const wipe = async (id: string) => {
    await db.pool.query(`DELETE FROM resource_state WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`, [tenant, id]);
    await db.pool.query(`DELETE FROM inbox_events WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`, [tenant, id]);
  };

  beforeAll(async () => {
    const { settings, names } = await createTestTopics(kafka);
    events = names.events;
    env = bridgeEnv({
      brokers: testBrokers(),
      databaseUrl: db.url,
      events: settings.events,
      applied: settings.applied,
      partitions: 3,
      group,
    });
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
    await producer.connect();
    // Resource a: an hour ago, versions 1-5, then a late stale v3 and a redelivery of v5.
    // Resource b: a minute ago, versions 1-3.
    await producer.send({
      topic: events,
      acks: -1,
      messages: [...aEvents, aStale, aEvents[4]!].map((e, i) => ingressRecord(e, old, undefined, traced.get(i))),
    });
    await producer.send({ topic: events, acks: -1, messages: bEvents.map((e) => ingressRecord(e, recent)) });
    await producer.disconnect();
  });

  it('--dry-run counts the records of the range and applies nothing', async () => {
    const run = await runBridge(['reprocess', '--topic', events, '--from', '0', '--dry-run', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.json()).toMatchObject({ dry_run: true, records: 10 });
    expect(run.json().outcomes).toBeUndefined();
    const { rows } = await db.pool.query(
      'SELECT (SELECT count(*) FROM inbox_events)::int AS inbox, (SELECT count(*) FROM resource_state)::int AS state, (SELECT count(*) FROM applied_outbox)::int AS outbox',
    );
    expect(rows[0]).toEqual({ inbox: 0, state: 0, outbox: 0 });
  });

  it('applies a range through the apply path and counts by outcome, without touching the real group', async () => {
    const run = await runBridge(['reprocess', '--topic', events, '--from', '0', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.json()).toMatchObject({
      dry_run: false,
      records: 10,
      outcomes: { applied: 8, stale: 1, duplicate: 1, duplicate_version: 0, quarantined: 0, invalid: 0 },
    });
    expect((await db.pool.query(STATE, [tenant, a])).rows[0]).toMatchObject({
      version: '5',
      deleted: false,
      last_event_id: aEvents[4]!.event_id,
    });
    const [offsets] = await admin.fetchOffsets({ groupId: group, topics: [events] });
    expect(offsets!.partitions.every((p) => p.offset === '-1')).toBe(true);
    // The command deleted its throwaway group. (Other files may be running a reprocess of their
    // own right now: only a group left behind empty would be this command's.)
    const throwaway = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.startsWith('bridge-cli-reprocess'));
    const { groups: described } = throwaway.length > 0 ? await admin.describeGroups(throwaway) : { groups: [] };
    expect(described.filter((g) => g.state === 'Empty').map((g) => g.groupId)).toEqual([]);

    const again = await runBridge(['reprocess', '--topic', events, '--from', '0'], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/10 records reprocessed: applied 0, stale 0, duplicate 10/);
  });

  it('rebuilds a wiped resource exactly from an offset range and from a time range', async () => {
    const stateA = (await db.pool.query(STATE, [tenant, a])).rows;
    const inboxA = (await db.pool.query(INBOX, [tenant, a])).rows;
    const stateB = (await db.pool.query(STATE, [tenant, b])).rows;
    const inboxB = (await db.pool.query(INBOX, [tenant, b])).rows;
    expect(stateA).toHaveLength(1);
    expect(inboxA).toHaveLength(6);

    await wipe(a);
    expect((await db.pool.query(STATE, [tenant, a])).rows).toEqual([]);
    const byOffset = await runBridge(['reprocess', '--topic', events, '--from', '0', '--json'], env);
    expect(byOffset.code, byOffset.stderr).toBe(0);
    expect(byOffset.json().outcomes).toMatchObject({ applied: 5, stale: 1, duplicate: 4 });
    expect((await db.pool.query(STATE, [tenant, a])).rows).toEqual(stateA);
    expect((await db.pool.query(INBOX, [tenant, a])).rows).toEqual(inboxA);

    // b was produced a minute ago, a an hour ago: a time range between them reads only b's records.
    await wipe(b);
    const between = new Date((old + recent) / 2).toISOString();
    const byTime = await runBridge(['reprocess', '--topic', events, '--from', between, '--to', new Date().toISOString(), '--json'], env);
    expect(byTime.code, byTime.stderr).toBe(0);
    expect(byTime.json()).toMatchObject({ records: 3, outcomes: { applied: 3 } });
    expect((await db.pool.query(STATE, [tenant, b])).rows).toEqual(stateB);
    expect((await db.pool.query(INBOX, [tenant, b])).rows).toEqual(inboxB);
  });

  it('--partition and an exclusive --to offset narrow the range', async () => {
    const partition = (await db.pool.query(`SELECT source_partition FROM inbox_events WHERE event_id = $1`, [aEvents[0]!.event_id])).rows[0]
      .source_partition as number;
    const run = await runBridge(
      ['reprocess', '--topic', events, '--partition', String(partition), '--from', '1', '--to', '3', '--dry-run', '--json'],
      env,
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.json().partitions).toEqual([{ partition, from: '1', to: '3', records: 2 }]);
  });

  it('trace shows the state and every event, newest first, with status, version, reason and coordinates', async () => {
    const run = await runBridge(['trace', tenant, 'theme', a, '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    const out = run.json();
    expect(out.state).toMatchObject({ version: 5, deleted: false, last_event_id: aEvents[4]!.event_id });
    expect(out.events).toHaveLength(6);
    const stale = out.events.find((e: any) => e.event_id === aStale.event_id);
    expect(stale).toMatchObject({ status: 'stale', version: 3, reason: 'stored version 5', kafka: { topic: events } });
    expect(out.events.filter((e: any) => e.status === 'applied').map((e: any) => e.version)).toEqual([5, 4, 3, 2, 1]);
    expect(out.applied.length).toBeGreaterThanOrEqual(5);
    // The trace id a record carried, also where the applier traces nothing (the CLI here): none otherwise.
    expect(stale.trace_id).toBe(TRACE_STALE);
    expect(out.events.find((e: any) => e.event_id === aEvents[1]!.event_id).trace_id).toBe(TRACE_V2);
    expect(out.events.filter((e: any) => e.trace_id === null)).toHaveLength(4);

    const text = await runBridge(['trace', tenant, 'theme', a], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/state: version 5, last event/);
    expect(text.stdout).toMatch(new RegExp(`${aStale.event_id}\\s+theme.updated\\s+3\\s+stale\\s+stored version 5`));
    expect(text.stdout).toMatch(new RegExp(`${aStale.event_id}.*\\b${TRACE_STALE}\\b`));

    const missing = await runBridge(['trace', tenant, 'theme', 'nope'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/nothing known about tenant_acme\/theme\/nope/);
  });
});
