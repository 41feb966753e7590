import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalKafka } from '../kit/infra.ts';
import type { IngressHandle } from '#services/ingress/ingress.ts';
import { testKafka, useLocalKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { post, signedRequest, startTestIngress } from '../kit/ingress.ts';
import { groupCaughtUp, outboxDrained, useWorker } from '../kit/worker.ts';
import {
  AnswerLog,
  answerRecord,
  appliedLedger,
  dlqEntries,
  firstOf,
  inboxRows,
  missingFromEventsTopic,
  resourceVersions,
  stateProblems,
} from '../kit/ledger.ts';
import { eventually, sleep } from '../kit/eventually.ts';
import { freePortRange } from '../kit/ports.ts';

const T = 'tenant_acme';
/** Each round SIGKILLs another broker (1, 2, 3, 1, ...) under load and starts it again. */
const ROUNDS = Number(process.env.FAILOVER_ROUNDS ?? 3);
const SENDERS = 8;
const RESOURCES = 48;
/** A killed broker stays down past broker.session.timeout.ms (9 s): its partitions get new leaders. */
const DOWN_MS = 12_000;

interface ReadySample {
  at: number;
  status: number;
  body: string;
  liveBrokers: number;
}

const basePort = await freePortRange(6);

/**
 * The real ingress (replication 3, min.insync.replicas 2) and a real worker whose relay publishes,
 * against three brokers of which one at a time is SIGKILLed under load. The loss this guards
 * against (kafkajs#1303, docs/architecture.md) showed in 2 of 6 single runs, hence several rounds.
 */
describe('failures: one broker of three killed under load, round after round', () => {
  const cluster = new LocalKafka({ name: `failover-${process.pid}`, nodes: 3, basePort });
  useLocalKafka(cluster, { startTimeoutMs: 150_000, timeoutMs: 240_000 });
  const { db, kafka, names, groupId, worker } = useWorker({
    cluster: { brokers: cluster.brokers, kafka: testKafka(uniqueName('failover'), cluster.brokers) },
    topics: { replicationFactor: 3, minInsyncReplicas: 2, eventsPartitions: 6 },
    config: (names) => ({ retryLevels: names.retries.length }),
    timeoutMs: 240_000,
  });
  let ingress: IngressHandle;
  const crashes: string[] = [];
  /** /readyz of the ingress, four times a second during the rounds. */
  const ready: ReadySample[] = [];

  beforeAll(async () => {
    worker.consumer.on(worker.consumer.events.CRASH, (e) => crashes.push(`${e.payload.error.message} (restart ${e.payload.restart})`));
    // The ingress with its production settings (ack timeout 5 s, broker probe every second).
    ingress = await startTestIngress(cluster.brokers, names.events);
    await eventually(async () => ingress.ready(), { timeoutMs: 60_000, message: 'ingress ready' });
  }, 240_000);

  afterAll(async () => {
    await ingress?.close();
  });

  /** Every partition of every topic (internal ones too) has all three replicas in sync. */
  async function fullIsr(): Promise<boolean> {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const { topics } = await admin.fetchTopicMetadata();
      return topics.every((t) => t.partitions.every((p) => p.leader >= 0 && p.isr.length === p.replicas.length));
    } catch {
      return false;
    } finally {
      await admin.disconnect().catch(() => {});
    }
  }

  it(`applies every acknowledged event over ${ROUNDS} rounds, and the applied topic never goes back`, async () => {
    const log = new AnswerLog();
    const versions = new Map<string, number>();
    const accepted = new Map<string, { resource: string; version: number }>();
    let liveBrokers = 3;
    let streaming = true;

    // Providers: each owns its resources and sends one at a time, the next version only after the
    // previous one was accepted; a 503 is retried with the same bytes (same event id), as the
    // Retry-After contract asks, just sooner than 5 s.
    const senders = Array.from({ length: SENDERS }, async (_, s) => {
      for (let n = 0; streaming; n += 1) {
        const resource = `fo_r${s + SENDERS * (n % (RESOURCES / SENDERS))}`;
        const version = (versions.get(resource) ?? 0) + 1;
        versions.set(resource, version);
        const request = signedRequest({ event: { tenant_id: T, resource: { id: resource, version } } });
        const event = { eventId: request.eventId, resource, version };
        for (let attempt = 0; attempt < 60; attempt += 1) {
          const sentAt = Date.now();
          const record = answerRecord(sentAt, await post(ingress.url, request).catch((e: Error) => e), event);
          log.record(record);
          if (record.status >= 200 && record.status < 300) {
            accepted.set(event.eventId, { resource, version });
            break;
          }
          await sleep(250);
        }
        await sleep(20);
      }
    });

    // /readyz of the ingress, four times a second, with how many brokers were up at the time.
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const at = Date.now();
        const live = liveBrokers;
        try {
          const res = await fetch(`${ingress.adminUrl}/readyz`, { signal: AbortSignal.timeout(2_000) });
          ready.push({ at, status: res.status, body: await res.text(), liveBrokers: Math.min(live, liveBrokers) });
        } catch (error) {
          ready.push({ at, status: 0, body: (error as Error).message, liveBrokers: Math.min(live, liveBrokers) });
        }
        await sleep(250);
      }
    })();

    const rounds: string[] = [];
    try {
      for (let round = 1; round <= ROUNDS; round += 1) {
        const node = ((round - 1) % 3) + 1;
        await eventually(fullIsr, { timeoutMs: 90_000, message: `round ${round}: every replica in sync` });
        const before = accepted.size;
        await eventually(async () => accepted.size >= before + 100, { timeoutMs: 60_000, message: `round ${round}: load flowing` });
        const atKill = accepted.size;
        const window = log.open(`round ${round}: broker ${node} down`);
        liveBrokers = 2;
        await cluster.stopNode(node, 'SIGKILL');
        const killedAt = Date.now();
        await eventually(async () => accepted.size >= atKill + 200 && Date.now() - killedAt >= DOWN_MS, {
          timeoutMs: 90_000,
          message: `round ${round}: load flowing with broker ${node} down`,
        });
        await cluster.startNode(node);
        liveBrokers = 3;
        log.close(window);
        rounds.push(
          `round ${round}: broker ${node} down ${((Date.now() - killedAt) / 1000).toFixed(1)} s, ${accepted.size - atKill} accepted meanwhile`,
        );
      }
      await eventually(fullIsr, { timeoutMs: 90_000, message: 'every replica in sync at the end' });
    } finally {
      streaming = false;
      await Promise.all(senders);
      watching = false;
      await watcher;
    }

    const ids = [...accepted.keys()];
    const applied = async () => [...(await inboxRows(db.pool, T, ids)).values()].filter((r) => r.status === 'applied').length;
    try {
      await eventually(async () => (await applied()) === ids.length, { timeoutMs: 90_000, message: 'every acknowledged event applied' });
      await eventually(() => groupCaughtUp(kafka, groupId, names.events), { timeoutMs: 60_000, message: 'group caught up' });
      await eventually(() => outboxDrained(db.pool), { timeoutMs: 60_000, message: 'outbox published' });
    } catch (error) {
      throw new Error(
        `${(error as Error).message}: ${await applied()}/${ids.length} applied; consumer crashes: ${JSON.stringify(crashes)}`,
      );
    }

    const problems: string[] = [];
    // Every 2xx is on the events topic...
    const events = await missingFromEventsTopic(kafka, names.events, ids);
    problems.push(
      ...events.missing.map(
        (id) => `accepted ${id} (${accepted.get(id)!.resource} v${accepted.get(id)!.version}) is not on the events topic`,
      ),
    );
    // ...and applied (each version was sent only after the one before it was acknowledged).
    const rows = await inboxRows(db.pool, T, ids);
    for (const [id, a] of accepted) {
      const row = rows.get(id);
      if (row?.status !== 'applied')
        problems.push(
          `accepted ${id} (${a.resource} v${a.version}) ended ${row ? `${row.status} (${row.reason}: ${row.last_error})` : 'missing'}`,
        );
    }
    const acceptedMax = new Map<string, number>();
    for (const a of accepted.values()) acceptedMax.set(a.resource, Math.max(acceptedMax.get(a.resource) ?? 0, a.version));
    const state = await resourceVersions(db.pool, T);
    problems.push(...stateProblems({ accepted: acceptedMax, sent: versions, state }));
    // The applied topic: every applied event once per key in apply order (or a byte-identical
    // replay), ending at resource_state; nothing foreign.
    const appliedTopic = await appliedLedger({ pool: db.pool, kafka, appliedTopic: names.applied, tenant: T, accepted: ids });
    problems.push(...appliedTopic.problems);
    const dlq = await dlqEntries(kafka, names.dlq);
    problems.push(...dlq.map((d) => `dead-lettered: ${d.eventId} (${d.key}) reason ${d.reason}: ${d.error}`));
    problems.push(...log.acceptanceProblems(0).filter((p) => !p.startsWith('no request outside')));

    const summary =
      `[failover] ${rounds.join('; ')}; ${log.summary()}; ${ids.length} acknowledged events, ${events.records} on the events topic, ` +
      `applied topic ${appliedTopic.records} records for ${appliedTopic.applied} applied events (${appliedTopic.repeated} repeated); /readyz red in ${redWithTwoUp().length} of ${ready.length} samples; consumer crashes ${crashes.length}${crashes.length ? `: ${crashes.slice(0, 3).join(' | ')}` : ''}`;
    console.error(summary);
    expect(firstOf(problems), summary).toEqual([]);
  }, 480_000);

  function redWithTwoUp(): ReadySample[] {
    return ready.filter((r) => r.liveBrokers >= 2 && r.status !== 200);
  }

  /** Stretches of consecutive samples that were not 200, with the reason /readyz gave. */
  function redStretches(): string[] {
    const stretches: string[] = [];
    for (let i = 0; i < ready.length; i += 1) {
      if (ready[i]!.status === 200) continue;
      let j = i;
      while (j + 1 < ready.length && ready[j + 1]!.status !== 200) j += 1;
      const seconds = (ready[j]!.at - ready[i]!.at) / 1000 + 0.25;
      stretches.push(
        `${seconds.toFixed(2)} s from +${((ready[i]!.at - ready[0]!.at) / 1000).toFixed(1)} s with ${ready[i]!.liveBrokers} brokers up: ${ready[i]!.body.slice(0, 200)}`,
      );
      i = j;
    }
    return stretches;
  }

  // Regression (found by this test): with one broker of three SIGKILLed, the batch to its
  // partitions got no ack within ACK_TIMEOUT_MS and the publisher marked the whole broker
  // connection down, so /readyz answered 503 (red in 19 of 254 samples, 184 requests refused).
  // Now a failed batch only replaces the producer; the probe alone decides that the broker is down.
  it('/readyz of the ingress stays green while two brokers are up', () => {
    const red = redWithTwoUp();
    if (red.length > 0)
      console.error(
        `[failover] FINDING: /readyz red in ${red.length} of ${ready.length} samples with two brokers up: ${redStretches().slice(0, 6).join(' | ')}`,
      );
    expect(ready.length).toBeGreaterThan(0);
    expect(red.length, `ingress /readyz not ready while two brokers were up: ${redStretches().slice(0, 6).join(' | ')}`).toBe(0);
  });
});
