import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Admin } from '#plumbing/kafka/types.ts';
import { headerText } from '#plumbing/kafka/headers.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { readDlq, replayDeadLetters, type DlqClients, type ReplayOutcome } from '#domain/operations/dlq-replay/index.ts';
import type { DlqEntry } from '#domain/operations/dlq-records.ts';
import type { WebhookSource } from '#domain/sources/index.ts';
import { testBrokers } from '../kit/kafka.ts';
import { spawnService } from '../kit/service.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { body, freshEventId, freshId, hmacSource, sampleEvent, SECRET_A, SECRET_B, startHarness, type Harness } from '../kit/harness.ts';

// One tenant's theme resources under both orderings. The two sources stand for one provider's
// source before and after an operator changed its ordering in the sources file (a running bridge
// is given them directly: a sources file with both is refused, as the first test shows).
const TENANT = 'tenant_ordering';
const BY_VERSION = 'shop';
const BY_TIME = 'shop-clock';

const MINUTE = 60_000;
/** Times well in the past (an ingress refuses an occurred_at ahead of its clock), minutes apart. */
const at = (minutesAgo: number) => new Date(Date.now() - minutesAgo * MINUTE).toISOString();

interface StateRow {
  version: string | null;
  last_occurred_at: string | null;
  ordered_by: string;
  last_event_id: string;
}

describe('one ordering per resource (real ingress, worker, Kafka and Postgres)', () => {
  let h: Harness;
  let admin: Admin;
  let clients: DlqClients;

  beforeAll(async () => {
    const sources: WebhookSource[] = [
      hmacSource(BY_VERSION, SECRET_A, [TENANT]),
      { ...hmacSource(BY_TIME, SECRET_B, [TENANT]), occurredAtTypes: ['theme'] },
    ];
    // The dead letter from before the switch: its first apply fails for good.
    h = await startHarness({ sources, faults: [`permanent:${TENANT}/theme/thm_pre_switch:1`] });
    admin = h.kafka.admin();
    await admin.connect();
    clients = {
      kafka: h.kafka,
      admin,
      names: h.names,
      group: h.groupId,
      logger: createLogger({ name: 'ordering-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    };
  });
  afterAll(async () => {
    await admin?.disconnect();
    await h?.close();
  });

  const state = async (id: string): Promise<StateRow | undefined> =>
    (
      await h.db.pool.query<StateRow>(
        `SELECT version, to_char(last_occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last_occurred_at,
           ordered_by, last_event_id
         FROM resource_state WHERE tenant_id = $1 AND resource_type = 'theme' AND resource_id = $2`,
        [TENANT, id],
      )
    ).rows[0];

  /** Posts through the source, asserting the 202. */
  const post = async (source: string, event: ReturnType<typeof sampleEvent>) => {
    const answer = await h.post(source, body(event));
    expect(answer.status, answer.body).toBe(202);
  };

  const timed = (id: string, occurredAt: string, version?: number) => {
    const event = sampleEvent(TENANT, id, version ?? 0, { event_id: freshEventId(), occurred_at: occurredAt });
    if (version === undefined) delete (event.resource as { version?: number }).version;
    return event;
  };

  const dlqEntries = async (eventId: string): Promise<DlqEntry[]> =>
    ((await readDlq(clients, 'ordering-test-dlq'))?.entries ?? []).filter((e) => e.eventId === eventId);

  const replay = async (entry: DlqEntry): Promise<ReplayOutcome> => {
    const [outcome] = await replayDeadLetters(clients, h.db.pool, [entry], { wait: true, timeoutMs: 90_000 });
    await h.settle();
    return outcome!;
  };

  it('a sources file with two sources ordering one tenant and type differently: the ingress and the worker refuse to start, naming both', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'bridge-sources-')), 'sources.json');
    writeFileSync(
      file,
      JSON.stringify({
        sources: [
          { id: 'shop', secrets: [{ id: 'shop-1', env: 'SHOP_SECRET' }], tenants: ['tenant_acme'], resourceTypes: ['theme'] },
          {
            id: 'shop-clock',
            secrets: [{ id: 'shop-clock-1', env: 'SHOP_CLOCK_SECRET' }],
            tenants: ['tenant_acme'],
            resourceTypes: ['theme'],
            ordering: 'occurred_at',
          },
        ],
      }),
    );
    const env = {
      KAFKA_BROKERS: testBrokers().join(','),
      DATABASE_URL: h.db.url,
      TOPIC_EVENTS: h.names.events,
      TOPIC_APPLIED: h.names.applied,
      PORT: '0',
      ADMIN_PORT: '0',
      WEBHOOK_SOURCES_FILE: file,
      SHOP_SECRET: 'shop-secret-0123456789abcdef',
      SHOP_CLOCK_SECRET: 'shop-clock-secret-0123456789abcdef',
    };
    const conflict = 'source "shop-clock" orders tenant "tenant_acme" type "theme" by occurred_at, source "shop" by version';
    for (const kind of ['ingress', 'worker'] as const) {
      const run = spawnService(kind, env);
      // liveness: a service that accepted the file keeps running; stop it and fail on the code below.
      const code = await Promise.race([
        run.exited.then((e) => e.code),
        new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 30_000)),
      ]);
      if (code === 'still running') await run.stop();
      expect(code, `${kind}: ${run.output()}`).toBe(1);
      expect(run.stderr()).toContain(conflict);
    }
  });

  it('after the type switched to occurred_at, a replayed pre-switch dead letter (a version, no time) is dead-lettered again and moves nothing; a late push stays stale', async () => {
    const id = 'thm_pre_switch';
    // Before the switch: a versioned event whose apply fails for good, to the DLQ.
    const preSwitch = sampleEvent(TENANT, id, 5, { event_id: freshEventId(), occurred_at: at(50) });
    await post(BY_VERSION, preSwitch);
    await h.settle();
    const [deadLetter] = await dlqEntries(preSwitch.event_id);
    expect(deadLetter, 'the pre-switch event is on the DLQ').toBeDefined();
    expect(headerText(deadLetter!.headers, 'ordered-by')).toBeUndefined();

    // After the switch: the provider's events are ordered by time.
    const current = timed(id, at(10));
    await post(BY_TIME, current);
    await h.settle();
    const before = await state(id);
    expect(before).toMatchObject({ ordered_by: 'occurred_at', version: null, last_event_id: current.event_id });
    expect(before!.last_occurred_at).toBe(`${current.occurred_at.slice(0, 23)}000Z`);

    // The operator replays the old dead letter: it neither applies nor clears last_occurred_at.
    const outcome = await replay(deadLetter!);
    expect(outcome).toMatchObject({ status: 'dead_lettered', ok: false });
    expect(outcome.detail).toMatch(/^dead-lettered again \(ordering_mismatch\)/);
    expect(await state(id)).toEqual(before);
    const again = (await dlqEntries(preSwitch.event_id)).filter((e) => headerText(e.headers, 'replayed-from') !== undefined);
    expect(again.map((e) => [headerText(e.headers, 'dlq-reason'), headerText(e.headers, 'retry-last-error-message')])).toEqual([
      ['ordering_mismatch', 'event ordered by version, resource ordered by occurred_at'],
    ]);
    expect(await h.inbox(TENANT, preSwitch.event_id)).toMatchObject({
      status: 'dead_lettered',
      reason: 'ordering_mismatch: event ordered by version, resource ordered by occurred_at',
    });

    // A late push older than the stored time stays stale.
    const late = timed(id, at(30));
    await post(BY_TIME, late);
    await h.settle();
    expect(await h.inbox(TENANT, late.event_id)).toMatchObject({ status: 'stale' });
    expect(await state(id)).toEqual(before);
    // Nothing but the one time-ordered event reached the applied topic.
    expect((await h.applied(`${TENANT}/theme/${id}`)).map((r) => r.value.event_id)).toEqual([current.event_id]);
  });

  it('the switch command, then events of the new ordering apply by it; an event of the old one is dead-lettered, and replays once switched back', async () => {
    const env = bridgeEnv({ brokers: testBrokers(), databaseUrl: h.db.url, events: h.names.events, applied: h.names.applied });
    const id = freshId('thm');
    // Ordered by version: v1 then v2, each with its own occurred_at.
    const v1 = sampleEvent(TENANT, id, 1, { event_id: freshEventId(), occurred_at: at(40) });
    const v2 = sampleEvent(TENANT, id, 2, { event_id: freshEventId(), occurred_at: at(30) });
    await post(BY_VERSION, v1);
    await post(BY_VERSION, v2);
    await h.settle();
    expect(await state(id)).toMatchObject({ ordered_by: 'version', version: '2', last_occurred_at: null });

    // Before the switch a time-ordered event is dead-lettered, not applied over the versioned state.
    const early = timed(id, at(5));
    await post(BY_TIME, early);
    await h.settle();
    expect(await state(id)).toMatchObject({ ordered_by: 'version', version: '2', last_event_id: v2.event_id });
    expect(await h.inbox(TENANT, early.event_id)).toMatchObject({
      status: 'dead_lettered',
      reason: 'ordering_mismatch: event ordered by occurred_at, resource ordered by version',
    });

    const dry = await runBridge(
      ['ordering', 'switch', '--type', 'theme', '--tenant', TENANT, '--to', 'occurred_at', '--dry-run', '--json'],
      env,
    );
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.json()).toMatchObject({ dry_run: true, from: 'version', to: 'occurred_at', tenant: TENANT });
    expect(dry.json<{ rows: number }>().rows).toBeGreaterThanOrEqual(1);
    expect(await state(id)).toMatchObject({ ordered_by: 'version' });

    const run = await runBridge(['ordering', 'switch', '--type', 'theme', '--tenant', TENANT, '--to', 'occurred_at'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^theme \(tenant tenant_ordering\): \d+ resource\(s\) switched from version to occurred_at/);
    // Seeded from the last applied event (v2): its version stays, its time now orders the resource.
    expect(await state(id)).toMatchObject({
      ordered_by: 'occurred_at',
      version: '2',
      last_occurred_at: `${v2.occurred_at.slice(0, 23)}000Z`,
    });
    const rerun = await runBridge(['ordering', 'switch', '--type', 'theme', '--tenant', TENANT, '--to', 'occurred_at', '--json'], env);
    expect(rerun.json()).toMatchObject({ rows: 0 });

    // Time-ordered events: older than v2's time stale, newer applies; a versioned event is dead-lettered.
    const older = timed(id, at(35));
    const newer = timed(id, at(20), 7);
    const versioned = sampleEvent(TENANT, id, 9, { event_id: freshEventId(), occurred_at: at(1) });
    await post(BY_TIME, older);
    await post(BY_TIME, newer);
    await post(BY_VERSION, versioned);
    await h.settle();
    expect(await h.inbox(TENANT, older.event_id)).toMatchObject({ status: 'stale' });
    expect(await h.inbox(TENANT, newer.event_id)).toMatchObject({ status: 'applied' });
    expect(await h.inbox(TENANT, versioned.event_id)).toMatchObject({
      status: 'dead_lettered',
      reason: 'ordering_mismatch: event ordered by version, resource ordered by occurred_at',
    });
    expect(await state(id)).toMatchObject({
      ordered_by: 'occurred_at',
      version: '7',
      last_event_id: newer.event_id,
      last_occurred_at: `${newer.occurred_at.slice(0, 23)}000Z`,
    });

    // The dead-lettered time event from before the switch now applies on replay (its time is the newest).
    const [earlyLetter] = await dlqEntries(early.event_id);
    expect(await replay(earlyLetter!)).toMatchObject({ status: 'applied', ok: true });
    expect(await state(id)).toMatchObject({ last_event_id: early.event_id, ordered_by: 'occurred_at' });

    // Switched back to version: the stored version (7) stays, so the dead-lettered v9 applies on replay.
    const back = await runBridge(['ordering', 'switch', '--type', 'theme', '--tenant', TENANT, '--to', 'version', '--json'], env);
    expect(back.code, back.stderr).toBe(0);
    expect(back.json()).toMatchObject({ from: 'occurred_at', to: 'version' });
    const [versionedLetter] = await dlqEntries(versioned.event_id);
    expect(await replay(versionedLetter!)).toMatchObject({ status: 'applied', ok: true });
    expect(await state(id)).toMatchObject({ ordered_by: 'version', version: '9', last_event_id: versioned.event_id });
    // Every applied event of the resource, in apply order, and nothing else.
    expect((await h.applied(`${TENANT}/theme/${id}`)).map((r) => r.value.event_id)).toEqual([
      v1.event_id,
      v2.event_id,
      newer.event_id,
      early.event_id,
      versioned.event_id,
    ]);
  });
});
