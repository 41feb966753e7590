import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleThemeEvent, type EventEnvelope } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { startConsole, type ConsoleHandle } from '#services/console/console.ts';
import { repoRoot } from '../kit/infra.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { useTestDatabase } from '../kit/db.ts';
import { testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { groupCaughtUp, outboxDrained, workerEnv } from '../kit/worker.ts';
import { eventually } from '../kit/eventually.ts';

// "Log lines carry trace_id; `bridge trace` and the console show it": every event's W3C trace id,
// whatever its outcome, from the running services (tracing on) to the operator views. Spans go to
// an endpoint nobody listens on: what is checked here is what the database and the views keep.

const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;
const TENANT = 'tenant_acme';

const freshTraceId = () => randomBytes(16).toString('hex');
const traceparentOf = (traceId: string) => `00-${traceId}-${randomBytes(8).toString('hex')}-01`;

interface TraceEvent {
  event_id: string;
  status: string;
  trace_id: string | null;
}

describe('trace ids in bridge trace and the console (services as processes, tracing on)', () => {
  const kafka = testKafka();
  const { names } = useTestTopics(kafka, { eventsPartitions: 1 });
  const db = useTestDatabase();
  let ingress: ServiceProcess;
  let worker: ServiceProcess;
  let consoleHandle: ConsoleHandle;
  let port: number;
  const group = uniqueName('theme-applier');
  const themeId = uniqueName('thm_traced');
  const doomedId = uniqueName('thm_doomed');
  const flakyId = uniqueName('thm_flaky');
  /** event id -> the trace id its POST carried (or, without a traceparent, the one the ingress started). */
  const expected = new Map<string, string>();

  const post = async (event: EventEnvelope, traceId?: string, bytes = Buffer.from(JSON.stringify(event), 'utf8')) => {
    const headers: Record<string, string> = {
      ...signWebhook({ scheme: 'hmac-sha256', secret: devEnv.DEMO_SECRET!, body: bytes, id: event.event_id }),
      'content-type': 'application/json',
      'x-webhook-event': event.event_type,
    };
    if (traceId !== undefined) headers.traceparent = traceparentOf(traceId);
    const answer = await fetch(`http://127.0.0.1:${port}/webhooks/demo`, { method: 'POST', headers, body: bytes });
    expect(answer.status, await answer.text()).toBe(202);
  };
  const event = (id: string, version: number, extra: Partial<EventEnvelope> = {}) =>
    sampleThemeEvent({ tenant_id: TENANT, ...extra, resource: { id, version } });

  beforeAll(async () => {
    // Tracing on (an OTLP endpoint is set); nothing listens there, the exporter's failures are its own.
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
    ingress = spawnService('ingress', {
      ...devEnv,
      ...otel,
      KAFKA_BROKERS: testBrokers().join(','),
      TOPIC_EVENTS: names.events,
      PORT: '0',
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
    });
    worker = spawnService('worker', {
      ...otel,
      ...workerEnv({ brokers: testBrokers(), databaseUrl: db.url, names, group: group }),
      ADMIN_PORT: '0',
      RETRY_DELAYS_MS: '200,200,200,200',
      RETRY_JITTER: '0',
      // The doomed resource fails for good (dead-lettered); the flaky one once (retried, then applied).
      FAULT_INJECT: `permanent:${TENANT}/theme/${doomedId}:1,transient:${TENANT}/theme/${flakyId}:1`,
    });
    port = (await ingress.line('ingress listening')).port as number;
    await worker.line('joined consumer group');

    const v1 = event(themeId, 1);
    const v3 = event(themeId, 3, { idempotency_key: uniqueName('idem') });
    const sends: Array<[EventEnvelope, string | undefined]> = [
      [v1, freshTraceId()], // applied
      [v3, freshTraceId()], // applied
      [event(themeId, 2), freshTraceId()], // stale
      [event(themeId, 3), freshTraceId()], // duplicate_version
      [event(themeId, 4, { idempotency_key: v3.idempotency_key! }), freshTraceId()], // duplicate (idempotency key)
      [event(themeId, 5), undefined], // applied, in a trace the ingress starts
      [event(doomedId, 1), freshTraceId()], // dead_lettered
      [event(flakyId, 1), freshTraceId()], // retrying, then applied
    ];
    for (const [e, traceId] of sends) {
      await post(e, traceId);
      if (traceId !== undefined) expected.set(e.event_id, traceId);
    }
    // The ingress started the trace of the one sent without a traceparent: its request line says which.
    // Waited for: the ingress writes its log lines up to 100 ms after the request (LOG_BUFFER_BYTES).
    const started = (await ingress.line('webhook', (l) => l.event_id === sends[5]![0].event_id)) as { trace_id?: string };
    expect(started.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expected.set(sends[5]![0].event_id, started.trace_id!);

    // The same event id as v1 with other content: quarantined (an anomaly row), then dead-lettered.
    const quarantineTrace = freshTraceId();
    await post({ ...v1, data: { ...v1.data, name: 'something else' } } as EventEnvelope, quarantineTrace);
    expected.set(`anomaly:${v1.event_id}`, quarantineTrace);

    await eventually(() => groupCaughtUp(kafka, group, names.events), { timeoutMs: 60_000, message: 'main group caught up' });
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM inbox_events WHERE status IN ('received', 'retrying')",
        );
        return rows[0]!.n === 0;
      },
      { message: 'every event settled' },
    );
    await eventually(() => outboxDrained(db.pool), { timeoutMs: 60_000, message: 'outbox drained' });

    consoleHandle = await startConsole(
      {
        port: 0,
        host: '127.0.0.1',
        operatorToken: undefined,
        brokers: testBrokers(),
        databaseUrl: db.url,
        statementTimeoutMs: 10_000,
        names,
        group,
        ingressMetricsUrl: `http://127.0.0.1:${await ingress.adminPort()}/metrics`,
        logLevel: 'silent',
      },
      { logger: createLogger({ name: 'console-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }) },
    );
  });
  afterAll(async () => {
    await consoleHandle?.close();
    await ingress?.stop();
    await worker?.stop();
  });

  const trace = async (id: string) => {
    const env = bridgeEnv({ brokers: testBrokers(), databaseUrl: db.url, events: names.events, applied: names.applied });
    const run = await runBridge(['trace', TENANT, 'theme', id, '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    return run.json<{
      events: TraceEvent[];
      anomalies: Array<{ event_id: string; trace_id: string | null }>;
      applied: Array<{ event_id: string; trace_id: string | null }>;
    }>();
  };

  it('bridge trace shows every event with the trace id it carried or started, whatever its outcome', async () => {
    const out = await trace(themeId);
    expect(new Set(out.events.map((e) => e.status))).toEqual(new Set(['applied', 'stale', 'duplicate_version', 'duplicate']));
    expect(out.events).toHaveLength(6);
    for (const e of out.events) expect(e.trace_id, `${e.event_id} (${e.status})`).toBe(expected.get(e.event_id));
    // The quarantined delivery has no inbox row of its own: its anomaly row keeps its trace.
    expect(out.anomalies).toHaveLength(1);
    expect(out.anomalies[0]!.trace_id).toBe(expected.get(`anomaly:${out.anomalies[0]!.event_id}`));
    // Each applied record is in the trace of the event that made it.
    expect(out.applied.length).toBe(3);
    for (const a of out.applied) expect(a.trace_id).toBe(expected.get(a.event_id));

    const doomed = await trace(doomedId);
    expect(doomed.events).toEqual([
      expect.objectContaining({ status: 'dead_lettered', trace_id: expected.get(doomed.events[0]!.event_id) }),
    ]);
    const flaky = await trace(flakyId);
    expect(flaky.events).toEqual([expect.objectContaining({ status: 'applied', trace_id: expected.get(flaky.events[0]!.event_id) })]);
    expect(flaky.events[0]!.trace_id).toMatch(/^[0-9a-f]{32}$/);

    // The text output has a trace column.
    const env = bridgeEnv({ brokers: testBrokers(), databaseUrl: db.url, events: names.events, applied: names.applied });
    const text = await runBridge(['trace', TENANT, 'theme', doomedId], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/\bTRACE\b/);
    expect(text.stdout).toContain(doomed.events[0]!.trace_id!);
  });

  it("the console's resource page shows each event's trace id in its timeline", async () => {
    for (const id of [themeId, doomedId, flakyId]) {
      const html = await (await fetch(`${consoleHandle.url}/resource?tenant=${TENANT}&type=theme&id=${id}`)).text();
      const rows = [...html.matchAll(/<tr data-event-id="([^"]+)">([\s\S]*?)<\/tr>/g)].map(([, eventId, cells]) => ({
        eventId,
        trace: /<td data-col="trace">\s*(?:<code>)?([0-9a-f]{32})?/.exec(cells!)?.[1],
      }));
      expect(rows.length, id).toBeGreaterThan(0);
      for (const row of rows) expect(row.trace, `${id}: ${row.eventId}`).toBe(expected.get(row.eventId!));
    }
    const html = await (await fetch(`${consoleHandle.url}/resource?tenant=${TENANT}&type=theme&id=${themeId}`)).text();
    // The quarantined delivery's anomaly, with its trace.
    const anomalyTrace = [...expected.entries()].find(([k]) => k.startsWith('anomaly:'))![1];
    expect(html).toMatch(new RegExp(`data-testid="anomalies"[\\s\\S]*${anomalyTrace}`));
  });
});
