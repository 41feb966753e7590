import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleThemeEvent } from '#domain/contract/index.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { repoRoot } from '../kit/infra.ts';
import { useTestDatabase } from '../kit/db.ts';
import { readTopic, testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { eventually } from '../kit/eventually.ts';

// One trace from the POST to the applied record, with the services run as processes (as deployed)
// and the spans collected by a real OTLP/HTTP receiver (the exporter's JSON encoding).

const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
  service: string;
}

interface OtlpExport {
  resourceSpans: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: { spans: Omit<OtlpSpan, 'service'>[] }[];
  }[];
}

const SPAN_KIND = { server: 2, producer: 4, consumer: 5 } as const;

function attribute(span: OtlpSpan, key: string): string | undefined {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : String(value.intValue));
}

async function startReceiver(): Promise<{ url: string; spans: OtlpSpan[]; paths: string[]; close: () => Promise<void> }> {
  const spans: OtlpSpan[] = [];
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      paths.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
      if (req.method === 'POST' && req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpExport;
        for (const rs of body.resourceSpans) {
          const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
          for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, service });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, spans, paths, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('tracing: one trace from the POST to the applied record (services as processes, real OTLP/HTTP receiver)', () => {
  const kafka = testKafka();
  const { names } = useTestTopics(kafka, { eventsPartitions: 1 });
  const db = useTestDatabase();
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const running: ServiceProcess[] = [];

  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    for (const s of running) await s.stop();
    await receiver.close();
  });

  it('continues the provider traceparent through the events topic, the apply and the outbox onto the applied record', async () => {
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    const ingress = spawnService('ingress', {
      ...devEnv,
      ...otel,
      OTEL_SERVICE_NAME: 'bridge-ingress-test',
      KAFKA_BROKERS: testBrokers().join(','),
      TOPIC_EVENTS: names.events,
      PORT: '0',
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
    });
    running.push(ingress);
    const worker = spawnService('worker', {
      ...otel,
      KAFKA_BROKERS: testBrokers().join(','),
      DATABASE_URL: db.url,
      TOPIC_EVENTS: names.events,
      TOPIC_APPLIED: names.applied,
      CONSUMER_GROUP: uniqueName('theme-applier'),
      ADMIN_PORT: '0',
    });
    running.push(worker);
    const { port } = (await ingress.line('ingress listening')) as { port: number };
    await worker.line('joined consumer group');

    const event = sampleThemeEvent({ tenant_id: 'tenant_acme', resource: { id: uniqueName('thm'), version: 1 } });
    const bytes = Buffer.from(JSON.stringify(event), 'utf8');
    const providerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const providerSpan = '00f067aa0ba902b7';
    const headers = {
      ...signWebhook({ scheme: 'hmac-sha256', secret: devEnv.DEMO_SECRET!, body: bytes, id: event.event_id }),
      'content-type': 'application/json',
      'x-webhook-event': event.event_type,
      traceparent: `00-${providerTrace}-${providerSpan}-01`,
      tracestate: 'provider=abc',
    };
    const answer = await fetch(`http://127.0.0.1:${port}/webhooks/demo`, { method: 'POST', headers, body: bytes });
    expect(answer.status).toBe(202);
    await answer.text();

    const key = `tenant_acme/theme/${event.resource.id}`;
    const applied = await eventually(async () => (await readTopic(kafka, names.applied)).find((r) => r.key === key), {
      timeoutMs: 60_000,
      message: 'the applied record',
    });
    const [, appliedTrace, appliedParent] = applied.headers.traceparent!.split('-');
    expect(appliedTrace).toBe(providerTrace);
    // The W3C tracestate of the provider travels with the trace.
    expect(applied.headers.tracestate).toBe('provider=abc');

    const inTrace = () => receiver.spans.filter((s) => s.traceId === providerTrace);
    const named = (service: string, name: string) => inTrace().find((s) => s.service === service && s.name === name);
    await eventually(
      async () =>
        named('bridge-ingress-test', 'POST /webhooks/:source') &&
        named('worker', `process ${names.events}`) &&
        named('worker', `send ${names.applied}`),
      { timeoutMs: 30_000, message: 'the ingress, apply and relay spans' },
    );
    expect(receiver.paths.every((p) => p.startsWith('POST /v1/traces application/json'))).toBe(true);

    const request = named('bridge-ingress-test', 'POST /webhooks/:source')!;
    expect(request.kind).toBe(SPAN_KIND.server);
    expect(request.parentSpanId).toBe(providerSpan);
    const verify = named('bridge-ingress-test', 'verify')!;
    expect(verify.parentSpanId).toBe(request.spanId);
    const publish = named('bridge-ingress-test', `send ${names.events}`)!;
    expect(publish.kind).toBe(SPAN_KIND.producer);
    expect(publish.parentSpanId).toBe(request.spanId);

    const apply = named('worker', `process ${names.events}`)!;
    expect(apply.kind).toBe(SPAN_KIND.consumer);
    expect(apply.parentSpanId).toBe(publish.spanId);
    expect(attribute(apply, 'bridge.apply.outcome')).toBe('applied');
    expect(attribute(apply, 'bridge.event_id')).toBe(event.event_id);
    // The applied record continues the apply span (stored with the outbox row).
    expect(appliedParent).toBe(apply.spanId);

    const relay = named('worker', `send ${names.applied}`)!;
    expect(relay.kind).toBe(SPAN_KIND.producer);
    expect(relay.parentSpanId).toBe(apply.spanId);

    // Log lines carry the trace id.
    const requestLine = (await ingress.line('webhook')) as { trace_id?: string; event_id?: string };
    expect(requestLine).toMatchObject({ event_id: event.event_id, trace_id: providerTrace });
    const eventLine = (await worker.line('event processed')) as { trace_id?: string; event_id?: string };
    expect(eventLine).toMatchObject({ event_id: event.event_id, trace_id: providerTrace });

    const { rows } = await db.pool.query<{ traceparent: string | null }>('SELECT traceparent FROM applied_outbox WHERE event_id = $1', [
      event.event_id,
    ]);
    expect(rows[0]!.traceparent).toBe(applied.headers.traceparent);
  });
});
