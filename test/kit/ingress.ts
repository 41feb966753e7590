// The ingress in tests: the test sources and their secrets, a running one for a suite (useIngress),
// signed requests, and sending them as raw HTTP.
import { createHash } from 'node:crypto';
import http from 'node:http';
import { sampleThemeEvent, type ReceivedEnvelope, type SampleThemeEventOverrides } from '#domain/contract/index.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { signWebhook } from '#domain/signing/index.ts';
import type { SignatureScheme } from '#domain/signing/index.ts';
import type { WebhookSource } from '#domain/sources/index.ts';
import type { IngressConfig } from '#services/ingress/config.ts';
import { startIngress, type IngressHandle } from '#services/ingress/ingress.ts';
import type { TopicNames, TopicSettings } from '#plumbing/kafka/topics.ts';
import type { Kafka } from '#plumbing/kafka/types.ts';
import { suiteFixture, type FixtureOptions } from './fixture.ts';
import { testBrokers, testKafka, useTestTopics } from './kafka.ts';

export const HMAC_SECRET = 'test-hmac-secret-0123456789abcdef';
export const HMAC_SECRET_NEXT = 'test-hmac-secret-next-9876543210';
export const STD_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

export function testSources(): WebhookSource[] {
  return [
    {
      id: 'acme',
      scheme: 'hmac-sha256',
      secrets: [
        { id: 'acme-old', value: HMAC_SECRET },
        { id: 'acme-new', value: HMAC_SECRET_NEXT },
      ],
      tenants: ['tenant_acme', 'tenant_other'],
      toleranceSeconds: 300,
      resourceTypes: ['theme'],
    },
    {
      id: 'acme-std',
      scheme: 'standard-webhooks',
      secrets: [{ id: 'std-1', value: STD_SECRET }],
      tenants: ['tenant_acme'],
      toleranceSeconds: 300,
      resourceTypes: ['theme'],
    },
  ];
}

/** What the ingress's config is read from: the dev sources file and a broker (never reached). */
export const INGRESS_BASE_ENV = { KAFKA_BROKERS: '127.0.0.1:9092', WEBHOOK_SOURCES_FILE: 'infra/dev/dev-sources.json' };
/** The secrets the dev sources file names, each of a length the ingress accepts. */
export const INGRESS_SECRET_ENV = {
  DEMO_SECRET: 'x'.repeat(32),
  DEMO_STD_SECRET: 'whsec_ZGV2LWRlbW8tc3RkLXNlY3JldC0zMi1ieXRlcyEh',
  DEMO_BODY_SECRET: 'y'.repeat(32),
  DEMO_STRICT_SECRET: 'z'.repeat(32),
  DEMO_TIME_SECRET: 'w'.repeat(32),
};

/** The headers the ingress writes on an event's record (a test writing the record itself). */
export function ingressHeaders(
  event: ReceivedEnvelope,
  body: string,
  { source = 'demo', receivedAt = new Date() }: { source?: string; receivedAt?: Date } = {},
): Record<string, string> {
  return {
    'event-id': event.event_id,
    source,
    'received-at': receivedAt.toISOString(),
    'body-sha256': createHash('sha256').update(body).digest('hex'),
    'event-type': event.event_type,
  };
}

export async function startTestIngress(brokers: string[], topic: string, overrides: Partial<IngressConfig> = {}): Promise<IngressHandle> {
  return startIngress(
    { port: 0, host: '127.0.0.1', adminPort: 0, adminHost: '127.0.0.1', brokers, topic, sources: testSources(), ...overrides },
    { logger: createLogger({ name: 'ingress-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }) },
  );
}

export interface TestIngressOptions extends FixtureOptions {
  /** Brokers of the test's own (default: the test broker) and a client on them for the topics. */
  cluster?: { brokers: string[]; kafka: Kafka };
  /** The topic set's settings, over createTestTopics's. */
  topics?: Partial<TopicSettings>;
  /** Over startTestIngress's; a function is called when the ingress starts. */
  config?: Partial<IngressConfig> | (() => Partial<IngressConfig>);
}

export interface TestIngress {
  /** A client on the test broker. */
  kafka: Kafka;
  settings: TopicSettings;
  names: TopicNames;
  /** The running ingress (from the beforeAll on), publishing to names.events, closed after the suite. */
  ingress: IngressHandle;
}

/** An ingress for the suite, in this process, on a topic set of its own made before it. */
export function useIngress(options: TestIngressOptions = {}): TestIngress {
  const kafka = options.cluster?.kafka ?? testKafka();
  const { settings, names } = useTestTopics(kafka, options.topics);
  const ingress = suiteFixture(
    () =>
      startTestIngress(
        options.cluster?.brokers ?? testBrokers(),
        names.events,
        typeof options.config === 'function' ? options.config() : options.config,
      ),
    (started) => started.close(),
    options,
  );
  return { kafka, settings, names, ingress };
}

export interface SignedRequest {
  path: string;
  headers: Array<[string, string]>;
  body: Buffer;
  eventId: string;
  key: string;
}

export function signedRequest(
  options: {
    source?: string;
    scheme?: SignatureScheme;
    secret?: string;
    event?: SampleThemeEventOverrides;
    timestamp?: number;
    body?: Buffer;
  } = {},
): SignedRequest {
  const scheme = options.scheme ?? 'hmac-sha256';
  const source = options.source ?? (scheme === 'hmac-sha256' ? 'acme' : 'acme-std');
  const secret = options.secret ?? (scheme === 'hmac-sha256' ? HMAC_SECRET : STD_SECRET);
  const event = sampleThemeEvent(options.event);
  const body = options.body ?? Buffer.from(JSON.stringify(event));
  const headers = signWebhook({ scheme, secret, body, id: event.event_id, timestamp: options.timestamp });
  return {
    path: `/webhooks/${source}`,
    headers: Object.entries(headers),
    body,
    eventId: event.event_id,
    key: `${event.tenant_id}/${event.resource.type}/${event.resource.id}`,
  };
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/** node:http so tests control raw header lines (repeats included), which fetch would merge. */
export async function send(
  baseUrl: string,
  request: { path: string; headers: Array<[string, string]>; body: Buffer | string; method?: string },
): Promise<Answer> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await sendOnce(baseUrl, request);
    } catch (error) {
      // A kept-alive socket the server closed (keepAliveTimeout) just as the request was written:
      // the server never read it, so sending again is safe (the retry node's docs prescribe).
      if (
        (error as { reusedSocket?: boolean; code?: string }).reusedSocket &&
        (error as { code?: string }).code === 'ECONNRESET' &&
        attempt < 3
      )
        continue;
      throw error;
    }
  }
}

function sendOnce(
  baseUrl: string,
  request: { path: string; headers: Array<[string, string]>; body: Buffer | string; method?: string },
): Promise<Answer> {
  const url = new URL(request.path, baseUrl);
  const body = typeof request.body === 'string' ? Buffer.from(request.body) : request.body;
  const headers = request.headers.some(([name]) => ['content-length', 'transfer-encoding'].includes(name.toLowerCase()))
    ? request.headers
    : [...request.headers, ['content-length', String(body.length)] as [string, string]];
  return new Promise((resolve, reject) => {
    const req = http.request({ method: request.method ?? 'POST', host: url.hostname, port: url.port, path: url.pathname, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    const grouped = new Map<string, string[]>();
    for (const [name, value] of headers) grouped.set(name.toLowerCase(), [...(grouped.get(name.toLowerCase()) ?? []), value]);
    // An array value becomes repeated header lines on the wire.
    for (const [name, values] of grouped) req.setHeader(name, values.length === 1 ? values[0]! : values);
    req.on('error', (error) => reject(Object.assign(error, { reusedSocket: req.reusedSocket })));
    req.end(body);
  });
}

export function post(baseUrl: string, signed: SignedRequest): Promise<Answer> {
  return send(baseUrl, signed);
}

export async function readyz(handle: IngressHandle): Promise<number> {
  const res = await fetch(`${handle.adminUrl}/readyz`);
  await res.text();
  return res.status;
}
