import { beforeAll, describe, expect, it } from 'vitest';
import type { Admin, Consumer } from '#plumbing/kafka/types.ts';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import { createTestTopics, testBrokers, testKafka, useTestAdmin } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { sleep } from '../kit/eventually.ts';

async function committed(admin: Admin, groupId: string, topic: string): Promise<Record<number, string>> {
  const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return Object.fromEntries(t!.partitions.map((p) => [p.partition, p.offset]));
}

describe('bridge offsets reset (as a subprocess)', () => {
  const kafka = testKafka();
  const admin = useTestAdmin(kafka);
  let topic: string;
  let env: Record<string, string>;
  let lagEnv: Record<string, string>;
  const group = uniqueName('g');
  const old = Date.now() - 3_600_000;
  const recent = Date.now() - 60_000;

  beforeAll(async () => {
    const { settings, names } = await createTestTopics(kafka);
    topic = names.events;
    env = bridgeEnv({ brokers: testBrokers() });
    lagEnv = bridgeEnv({ brokers: testBrokers(), events: settings.events, applied: settings.applied, group });
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
    await producer.connect();
    // Partition 0: offsets 0-9 an hour old, 10-14 a minute old; partitions 1 and 2: 3 records each.
    await producer.send({
      topic,
      messages: Array.from({ length: 10 }, (_, i) => ({ partition: 0, value: `old${i}`, timestamp: String(old) })),
    });
    await producer.send({
      topic,
      messages: Array.from({ length: 5 }, (_, i) => ({ partition: 0, value: `new${i}`, timestamp: String(recent) })),
    });
    await producer.send({
      topic,
      messages: [1, 2].flatMap((partition) =>
        [0, 1, 2].map((i) => ({ partition, value: `p${partition}-${i}`, timestamp: String(recent) })),
      ),
    });
    await producer.disconnect();
  });

  it('refuses (exit 1) while the group has an active member; the plan shows the state', async () => {
    const consumer: Consumer = kafka.consumer({ groupId: group, sessionTimeout: 10_000, heartbeatInterval: 500 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    let seen = 0;
    const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
    await consumer.run({ eachMessage: async () => void (seen += 1) });
    await joined;
    try {
      const deadline = Date.now() + 40_000;
      while (seen < 21 && Date.now() < deadline) await sleep(100);
      expect(seen).toBe(21);

      const refused = await runBridge(['offsets', 'reset', '--group', group, '--topic', topic, '--to', 'earliest', '--execute'], env);
      expect(refused.code, refused.stdout + refused.stderr).toBe(1);
      expect(refused.stderr).toMatch(new RegExp(`refusing to reset offsets: group ${group} has 1 active member\\(s\\) \\(state Stable\\)`));

      const plan = await runBridge(['offsets', 'reset', '--group', group, '--topic', topic, '--to', 'earliest', '--json'], env);
      expect(plan.code, plan.stderr).toBe(0);
      expect(plan.json()).toMatchObject({ executed: false, group_state: 'Stable', members: 1 });
    } finally {
      await consumer.disconnect();
    }
  });

  it('prints the plan by default and with --execute --dry-run, changing nothing', async () => {
    await sleep(200);
    const before = await committed(admin, group, topic);
    expect(before).toEqual({ 0: '15', 1: '3', 2: '3' });
    const plan = await runBridge(['offsets', 'reset', '--group', group, '--topic', topic, '--to', 'earliest'], env);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toMatch(/PARTITION\s+CURRENT\s+NEW\s+LOW\s+HIGH/);
    expect(plan.stdout).toMatch(/^0\s+15\s+0\s+0\s+15/m);
    expect(plan.stdout).toMatch(/plan only: add --execute/);
    const dry = await runBridge(
      ['offsets', 'reset', '--group', group, '--topic', topic, '--to', 'earliest', '--execute', '--dry-run', '--json'],
      env,
    );
    expect(dry.code).toBe(0);
    expect(dry.json().executed).toBe(false);
    expect(await committed(admin, group, topic)).toEqual(before);
  });

  it('--execute moves the group to a time and to earliest; an offset is clamped to the range', async () => {
    const between = new Date((old + recent) / 2).toISOString();
    const byTime = await runBridge(['offsets', 'reset', '--group', group, '--topic', topic, '--to', between, '--execute', '--json'], env);
    expect(byTime.code, byTime.stderr).toBe(0);
    expect(byTime.json().executed).toBe(true);
    expect(await committed(admin, group, topic)).toEqual({ 0: '10', 1: '0', 2: '0' });

    // An explicit offset beyond the log is clamped (shown in the plan; setOffsets costs ~5 s per run).
    const one = await runBridge(['offsets', 'reset', '--group', group, '--topic', topic, '--to', '99', '--partition', '1'], env);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/^1\s+0\s+3\s+0\s+3\s+clamped to range/m);
    expect(one.stdout).not.toMatch(/^[02]\s/m);

    const earliest = await runBridge(['offsets', 'reset', '--group', group, '--topic', topic, '--to', 'earliest', '--execute'], env);
    expect(earliest.code, earliest.stderr).toBe(0);
    expect(await committed(admin, group, topic)).toEqual({ 0: '0', 1: '0', 2: '0' });
  });

  it('lag shows committed, end and lag per partition for the main group and its retry groups', async () => {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
    await producer.connect();
    await producer.send({ topic: `${topic}.retry.1`, messages: [{ partition: 2, value: 'r' }] });
    await producer.disconnect();
    const run = await runBridge(['lag', '--json'], lagEnv);
    expect(run.code, run.stderr).toBe(0);
    const out = run.json();
    // After the reset to earliest everything is lag again; retry.1 was never consumed: lag from the log start.
    expect(out.partitions.filter((p: any) => p.group === group)).toEqual([
      { group, topic, partition: 0, committed: '0', low: '0', end: '15', lag: 15 },
      { group, topic, partition: 1, committed: '0', low: '0', end: '3', lag: 3 },
      { group, topic, partition: 2, committed: '0', low: '0', end: '3', lag: 3 },
    ]);
    expect(out.partitions.filter((p: any) => p.group === `${group}.retry.1`).map((p: any) => [p.committed, p.lag])).toEqual([
      [null, 0],
      [null, 0],
      [null, 1],
    ]);
    expect(out.total_lag).toBe(22);
    expect(out.groups).toEqual(
      [group, 1, 2, 3, 4].map((n) => ({ group: n === group ? group : `${group}.retry.${n}`, state: expect.any(String), members: 0 })),
    );
    const text = await runBridge(['lag'], lagEnv);
    expect(text.stdout).toMatch(/total lag: 22/);
  });

  it('an unknown topic fails with exit 1', async () => {
    const run = await runBridge(['offsets', 'reset', '--group', group, '--topic', uniqueName('nope'), '--to', 'latest'], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/does not exist/);
  });
});
