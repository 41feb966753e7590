import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Admin } from '#plumbing/kafka/types.ts';
import { defaultPartitioner } from '#plumbing/kafka/producers.ts';
import { resourceKey, sampleThemeEvent } from '#domain/contract/index.ts';
import { defaultFailureSettings, encodeDeadLetterInfo } from '#domain/failures/index.ts';
import { startWorker, type WorkerHandle } from '#services/worker/worker.ts';
import { createTestTopics, testBrokers, testKafka, readTopic, useTestAdmin } from '../kit/kafka.ts';
import { useTestDatabase } from '../kit/db.ts';
import { uniqueName } from '../kit/names.ts';
import { workerTestConfig } from '../kit/worker.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { eventually } from '../kit/eventually.ts';
import { ingressHeaders } from '../kit/ingress.ts';

const tenant = 'tenant_acme';

async function highSum(admin: Admin, topic: string): Promise<number> {
  return (await admin.fetchTopicOffsets(topic)).reduce((s, p) => s + Number(p.high), 0);
}

describe('bridge dlq list / show / replay (as a subprocess)', () => {
  const kafka = testKafka();
  const admin = useTestAdmin(kafka);

  describe('on a DLQ written in the failures format', () => {
    let env: Record<string, string>;
    let names: Awaited<ReturnType<typeof createTestTopics>>['names'];
    const poison = sampleThemeEvent({ tenant_id: tenant, resource: { id: uniqueName('t'), version: 3 } });
    const poisonBody = JSON.stringify(poison);
    const exhaustedAt = new Date(Date.now() - 3_600_000);

    beforeAll(async () => {
      const topics = await createTestTopics(kafka);
      names = topics.names;
      env = bridgeEnv({ brokers: testBrokers(), events: topics.settings.events, applied: topics.settings.applied, partitions: 3 });
      const info = (reason: string, at: Date, attempt: number) =>
        encodeDeadLetterInfo({
          attempt,
          firstFailureAt: new Date(at.getTime() - 60_000),
          lastErrorCode: reason === 'retries_exhausted' ? 'serialization_failure' : reason,
          lastErrorMessage: 'could not serialize access',
          originalTopic: names.events,
          originalPartition: 1,
          originalOffset: '41',
          reason,
          deadLetteredAt: at,
          failedTopic: reason === 'retries_exhausted' ? names.retries[3]! : names.events,
        });
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
      await producer.connect();
      await producer.send({
        topic: names.dlq,
        messages: [
          {
            key: resourceKey(poison),
            value: poisonBody,
            headers: { ...ingressHeaders(poison, poisonBody), ...info('retries_exhausted', exhaustedAt, 5) },
          },
          {
            key: 'tenant_acme/theme/x',
            value: '{"not":"an envelope"',
            headers: { source: 'demo', ...info('invalid_json', new Date(), 1) },
          },
        ],
      });
      await producer.disconnect();
    });

    it('list shows every record with reason, attempt and coordinates; --reason and --since filter', async () => {
      const all = await runBridge(['dlq', 'list', '--json'], env);
      expect(all.code, all.stderr).toBe(0);
      expect(all.json()).toMatchObject({ topic: names.dlq, total: 2, count: 2, reasons: { retries_exhausted: 1, invalid_json: 1 } });
      expect(all.json().records[0]).toMatchObject({
        event_id: poison.event_id,
        reason: 'retries_exhausted',
        attempt: 5,
        original: { topic: names.events, partition: 1, offset: '41' },
        failed_topic: names.retries[3],
        dead_lettered_at: exhaustedAt.toISOString(),
      });
      const byReason = await runBridge(['dlq', 'list', '--reason', 'invalid_json', '--json'], env);
      expect(byReason.json().records.map((r: any) => r.reason)).toEqual(['invalid_json']);
      const since = await runBridge(['dlq', 'list', '--since', new Date(Date.now() - 600_000).toISOString()], env);
      expect(since.code).toBe(0);
      expect(since.stdout).toMatch(/1 of 2 records on .*\(invalid_json 1\)/);
    });

    it('show prints headers, failure details and the body, by event id or partition:offset', async () => {
      const byId = await runBridge(['dlq', 'show', poison.event_id], env);
      expect(byId.code, byId.stderr).toBe(0);
      expect(byId.stdout).toMatch(/reason: retries_exhausted\s+attempt: 5/);
      expect(byId.stdout).toMatch(/last error: serialization_failure: could not serialize access/);
      expect(byId.stdout).toContain(`event-id: ${poison.event_id}`);
      expect(byId.stdout).toContain(`"event_id": "${poison.event_id}"`);
      const record = (await runBridge(['dlq', 'list', '--reason', 'invalid_json', '--json'], env)).json().records[0];
      const byCoords = await runBridge(['dlq', 'show', `${record.partition}:${record.offset}`, '--json'], env);
      expect(byCoords.json().records[0]).toMatchObject({ reason: 'invalid_json', body: '{"not":"an envelope"', event_id: null });
      const missing = await runBridge(['dlq', 'show', 'evt_nope'], env);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/no record evt_nope/);
    });

    it('replay --dry-run and replay of an unknown id send nothing', async () => {
      const before = await highSum(admin, names.events);
      const dry = await runBridge(['dlq', 'replay', '--all', '--dry-run', '--json'], env);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.json()).toMatchObject({ dry_run: true, count: 2 });
      const unknown = await runBridge(['dlq', 'replay', poison.event_id, 'evt_unknown', '--no-wait'], env);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/not on .*: evt_unknown; nothing was replayed/);
      expect(await highSum(admin, names.events)).toBe(before);
    });

    it('replay republishes the original key, body and headers to the events topic', async () => {
      const run = await runBridge(['dlq', 'replay', poison.event_id, '--no-wait', '--json'], env);
      expect(run.code, run.stderr).toBe(0);
      expect(run.json()).toMatchObject({ count: 1, failed: 0 });
      const [record] = await readTopic(kafka, names.events);
      expect(record!.key).toBe(resourceKey(poison));
      expect(record!.value.toString()).toBe(poisonBody);
      expect(Object.keys(record!.headers).sort()).toEqual([
        'body-sha256',
        'event-id',
        'event-type',
        'received-at',
        'replayed-from',
        'source',
      ]);
      expect(record!.headers['event-id']).toBe(poison.event_id);
    });
  });

  describe('with a running worker: a poison event whose cause was fixed', () => {
    const db = useTestDatabase();
    let env: Record<string, string>;
    let worker: WorkerHandle | undefined;
    const id = uniqueName('theme_poison');
    const poison = sampleThemeEvent({ tenant_id: tenant, resource: { id, version: 7 } });
    const key = resourceKey(poison);

    const start = async (events: string, applied: string, faults: number) =>
      startWorker(
        workerTestConfig({
          brokers: testBrokers(),
          databaseUrl: db.url,
          eventsTopic: events,
          appliedTopic: applied,
          overrides: {
            groupId: env.CONSUMER_GROUP!,
            failures: { ...defaultFailureSettings, faults: faults > 0 ? [{ kind: 'permanent', resource: key, count: faults }] : [] },
          },
        }),
        { adminServer: false },
      );
    afterAll(async () => {
      await worker?.close();
    });

    it('is dead-lettered, a replay while the fault persists fails (exit 1), a replay after the fix applies it', async () => {
      const { settings, names } = await createTestTopics(kafka);
      env = bridgeEnv({
        brokers: testBrokers(),
        databaseUrl: db.url,
        events: settings.events,
        applied: settings.applied,
        partitions: 3,
        group: uniqueName('theme-applier'),
      });
      // The fault outlasts any redelivery (a rebalance under load may deliver the event twice); the
      // fix is restarting the worker without it.
      worker = await start(settings.events, settings.applied, 1000);
      const body = JSON.stringify(poison);
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: defaultPartitioner });
      await producer.connect();
      await producer.send({ topic: names.events, acks: -1, messages: [{ key, value: body, headers: ingressHeaders(poison, body) }] });
      await producer.disconnect();
      await eventually(async () => (await highSum(admin, names.dlq)) >= 1, { timeoutMs: 60_000, message: 'the poison event in the DLQ' });
      await eventually(
        async () => {
          const { rows } = await db.pool.query('SELECT status FROM inbox_events WHERE event_id = $1', [poison.event_id]);
          return rows[0]?.status === 'dead_lettered';
        },
        { message: 'inbox status dead_lettered' },
      );

      const listed = await runBridge(['dlq', 'list', '--json'], env);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.json().records[0]).toEqual(
        expect.objectContaining({ event_id: poison.event_id, reason: 'constraint_violation', inbox_status: 'dead_lettered' }),
      );
      const dlqBefore = await highSum(admin, names.dlq);

      // Generous: when the machine is loaded (other suites' brokers restarting), joining a consumer
      // group to read the DLQ has taken most of a minute here; the harness outlasts the CLI's own wait.
      const stillBroken = await runBridge(['dlq', 'replay', poison.event_id, '--timeout-ms', '90000', '--json'], env, 150_000);
      expect(stillBroken.code, stillBroken.stdout + stillBroken.stderr).toBe(1);
      expect(stillBroken.json().outcomes).toEqual([
        expect.objectContaining({
          event_id: poison.event_id,
          status: 'dead_lettered',
          ok: false,
          detail: expect.stringMatching(/^dead-lettered again \(constraint_violation\)/),
        }),
      ]);
      expect(await highSum(admin, names.dlq)).toBeGreaterThan(dlqBefore);

      // The cause is fixed: the worker restarts without the fault.
      await worker.close();
      worker = await start(settings.events, settings.applied, 0);
      const fixed = await runBridge(['dlq', 'replay', poison.event_id, '--timeout-ms', '90000'], env, 150_000);
      expect(fixed.code, fixed.stdout + fixed.stderr).toBe(0);
      expect(fixed.stdout).toMatch(new RegExp(`${poison.event_id}\\s+applied`));
      expect(fixed.stdout).toMatch(/1 replayed: applied 1/);
      const { rows } = await db.pool.query(
        `SELECT version, deleted FROM resource_state WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`,
        [tenant, id],
      );
      expect(rows).toEqual([{ version: '7', deleted: false }]);

      const after = await runBridge(['dlq', 'list', '--json'], env);
      expect(new Set(after.json().records.map((r: any) => r.inbox_status))).toEqual(new Set(['applied']));
      const trace = await runBridge(['trace', tenant, 'theme', id, '--json'], env);
      expect(trace.json().events).toEqual([
        expect.objectContaining({ event_id: poison.event_id, status: 'applied', attempts: expect.any(Number) }),
      ]);
    }, 420_000);
  });
});
