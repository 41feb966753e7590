import { z } from 'zod';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { kafkaEnv, logEnv, portSchema, positiveIntSchema, topicEnv } from '#plumbing/config/env.ts';
import { adminHostEnv } from '#plumbing/observability/admin-server.ts';
import { keyringFromEnv, loadSources, type SecretKeyring, type WebhookSource } from '#domain/sources/index.ts';

/**
 * What startIngress runs with: built from the environment by ingressConfigFromEnv, or given by a
 * test; what it leaves out comes from ingressDefaults.
 */
export interface IngressConfig {
  /** Public port; 0 picks a free one (tests). */
  port: number;
  host?: string;
  /** Admin port (/metrics, /healthz, /readyz); 0 picks a free one. */
  adminPort: number;
  adminHost?: string;
  brokers: string[];
  clientId?: string;
  /** The events topic; it must exist (topics come from shared/plumbing/kafka/topics.ts, never auto-created). */
  topic: string;
  /** The sources served (from the file); ignored with sourcesFromPostgres. */
  sources: WebhookSource[];
  /**
   * Sources from Postgres (SOURCES_FROM=postgres) instead: the port listens at once and serves
   * none until the first load (readiness 503 until then), then each change is swapped in whole.
   */
  sourcesFromPostgres?: SourcesFromPostgres;
  bodyLimitBytes?: number;
  ackTimeoutMs?: number;
  retryAfterSeconds?: number;
  maxBatchRecords?: number;
  maxBatchBytes?: number;
  lingerMs?: number;
  probeIntervalMs?: number;
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
  /** Open connections at once; past it a new connection is closed as soon as it is accepted. */
  maxConnections?: number;
  /**
   * Listening sockets on the port (SO_REUSEPORT, Linux): each accepts one new connection per turn
   * of the event loop (services/ingress/listeners.ts). 1: a plain listening socket.
   */
  listenSockets?: number;
  /**
   * Of those, what one client address (IPv4 address, IPv6 /64) may hold; past it 429 and the
   * connection closed. Default: clientConnectionShare(maxConnections).
   */
  maxClientConnections?: number;
  /** Request body bytes buffered at once across requests; past it a request is answered 503. */
  maxInflightBodyBytes?: number;
  /** Of those, what one client address (IPv4 address, IPv6 /64) may hold; past it 429. */
  maxClientBodyBytes?: number;
  /** A body that gets no byte for this long is cut off (408). */
  bodyIdleTimeoutMs?: number;
  /** A body not complete this long after its headers is cut off (408). */
  bodyTimeoutMs?: number;
  maxJsonDepth?: number;
  logLevel?: string;
  /** LOG_BUFFER_BYTES (stdoutDestination, used by main.ts). */
  logBufferBytes?: number;
}

export interface SourcesFromPostgres {
  databaseUrl: string;
  keyring: SecretKeyring;
  /** How often the configuration version is checked besides LISTEN (default 1 s). */
  pollMs?: number;
  /** How often the served version and the secrets' last use are written (default 5 s). */
  reportMs?: number;
}

/** The ingress's own tuning; startIngress fills in what its config leaves out from here. */
export const ingressDefaults = {
  bodyLimitBytes: 1024 * 1024,
  ackTimeoutMs: 5000,
  retryAfterSeconds: 5,
  maxBatchRecords: 500,
  maxBatchBytes: 512 * 1024,
  // Idle, a request is sent at the end of the event loop's turn (with whatever else was read in that
  // turn); under load the next batch fills while one waits for its ack. A linger would add its whole
  // length to every request's ack at a low rate, where there is nothing to batch with.
  lingerMs: 0,
  probeIntervalMs: 1000,
  // Node's defaults (60 s headers, 300 s request) let slow clients hold sockets for minutes.
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5000,
  // Without caps, each unauthenticated client may hold a socket and up to bodyLimitBytes for
  // requestTimeoutMs. 1024 connections; 64 MiB of bodies (64 requests at the 1 MiB limit, tens of
  // thousands of typical 1-2 KiB webhooks).
  maxConnections: 1024,
  // A turn of a loaded ingress takes milliseconds, tens of them on saturated cores: with too few
  // accepts a turn, a burst of new connections (a pool opening, senders without keep-alive) waits
  // in the kernel's queue, and the client, its requests unanswered, opens more. An idle socket costs nothing.
  listenSockets: 16,
  maxInflightBodyBytes: 64 * 1024 * 1024,
  // An eighth of the budget per client address (8 bodies at the 1 MiB limit): one client cannot
  // take the whole budget. Behind a proxy every request comes from its address: raise it there.
  maxClientBodyBytes: 8 * 1024 * 1024,
  // A body is read within these or cut off with 408: bytes held by a client that stalls or
  // trickles are released instead of held until requestTimeout.
  bodyIdleTimeoutMs: 5000,
  bodyTimeoutMs: 10_000,
  maxJsonDepth: 32,
} as const;

/**
 * A quarter of the connection slots per client address: a provider's pool can burst to hundreds of
 * sockets, and one address that holds its whole share still leaves three quarters to the rest.
 */
export function clientConnectionShare(maxConnections: number): number {
  return Math.max(1, Math.floor(maxConnections / 4));
}

const ingressEnvFields = z.object({
  ...kafkaEnv.shape,
  ADMIN_PORT: portSchema.default(DEFAULTS.adminPort.ingress),
  ...adminHostEnv.shape,
  ...logEnv.shape,
  TOPIC_EVENTS: topicEnv.shape.TOPIC_EVENTS,
  PORT: portSchema.default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  // file: the sources file, read once at start-up (a file-only deployment); postgres: the sources
  // as data, kept current while the ingress runs (shared/domain/sources/live.ts).
  SOURCES_FROM: z.enum(['file', 'postgres']).default('file'),
  WEBHOOK_SOURCES_FILE: z.string().min(1).optional(),
  DATABASE_URL: z.string().url().optional(),
  BRIDGE_SECRET_KEYS: z.string().optional(),
  BRIDGE_SECRET_KEY_ID: z.string().optional(),
  BODY_LIMIT_BYTES: positiveIntSchema.default(ingressDefaults.bodyLimitBytes),
  ACK_TIMEOUT_MS: positiveIntSchema.default(ingressDefaults.ackTimeoutMs),
  RETRY_AFTER_SECONDS: positiveIntSchema.default(ingressDefaults.retryAfterSeconds),
  PUBLISH_MAX_BATCH: positiveIntSchema.default(ingressDefaults.maxBatchRecords),
  PUBLISH_LINGER_MS: z.coerce.number().int().min(0).max(100).default(ingressDefaults.lingerMs),
  HEADERS_TIMEOUT_MS: positiveIntSchema.default(ingressDefaults.headersTimeoutMs),
  REQUEST_TIMEOUT_MS: positiveIntSchema.default(ingressDefaults.requestTimeoutMs),
  MAX_CONNECTIONS: positiveIntSchema.default(ingressDefaults.maxConnections),
  MAX_CLIENT_CONNECTIONS: positiveIntSchema.optional(),
  LISTEN_SOCKETS: z.coerce.number().int().min(1).max(64).default(ingressDefaults.listenSockets),
  KEEP_ALIVE_TIMEOUT_MS: positiveIntSchema.default(ingressDefaults.keepAliveTimeoutMs),
  MAX_INFLIGHT_BODY_BYTES: positiveIntSchema.default(ingressDefaults.maxInflightBodyBytes),
  MAX_CLIENT_BODY_BYTES: positiveIntSchema.default(ingressDefaults.maxClientBodyBytes),
  BODY_IDLE_TIMEOUT_MS: positiveIntSchema.default(ingressDefaults.bodyIdleTimeoutMs),
  BODY_TIMEOUT_MS: positiveIntSchema.default(ingressDefaults.bodyTimeoutMs),
});

/**
 * What each SOURCES_FROM needs, named when it is missing; checked even when other variables are
 * wrong, so one start-up error lists every problem.
 */
export const ingressEnvSchema = ingressEnvFields.superRefine(
  (env, ctx) => {
    const missing = (name: string, why: string) => ctx.addIssue({ code: 'custom', path: [name], message: `${name} is required ${why}` });
    const from = env.SOURCES_FROM ?? 'file';
    if (from === 'file' && env.WEBHOOK_SOURCES_FILE === undefined)
      missing('WEBHOOK_SOURCES_FILE', '(path to the webhook sources JSON), or set SOURCES_FROM=postgres');
    if (from === 'postgres') {
      if (env.DATABASE_URL === undefined) missing('DATABASE_URL', 'with SOURCES_FROM=postgres (the database the sources live in)');
      if (!env.BRIDGE_SECRET_KEYS?.trim())
        missing('BRIDGE_SECRET_KEYS', "with SOURCES_FROM=postgres (id:base64 keys that open the sources' secrets)");
    }
  },
  { when: (payload) => typeof payload.value === 'object' && payload.value !== null },
);

export type IngressEnv = z.infer<typeof ingressEnvSchema>;

/**
 * Throws SourcesConfigError when a secret of the file is missing (the ingress never starts without
 * its secrets), SecretKeyError when BRIDGE_SECRET_KEYS is malformed.
 */
export function ingressConfigFromEnv(env: IngressEnv, rawEnv: Record<string, string | undefined> = process.env): IngressConfig {
  return {
    port: env.PORT,
    host: env.HOST,
    adminPort: env.ADMIN_PORT,
    adminHost: env.ADMIN_HOST,
    brokers: env.KAFKA_BROKERS,
    clientId: env.KAFKA_CLIENT_ID ?? 'ingress',
    topic: env.TOPIC_EVENTS,
    sources: env.SOURCES_FROM === 'file' ? loadSources(env.WEBHOOK_SOURCES_FILE!, rawEnv) : [],
    ...(env.SOURCES_FROM === 'postgres'
      ? {
          sourcesFromPostgres: {
            databaseUrl: env.DATABASE_URL!,
            keyring: keyringFromEnv({ BRIDGE_SECRET_KEYS: env.BRIDGE_SECRET_KEYS, BRIDGE_SECRET_KEY_ID: env.BRIDGE_SECRET_KEY_ID })!,
          },
        }
      : {}),
    bodyLimitBytes: env.BODY_LIMIT_BYTES,
    ackTimeoutMs: env.ACK_TIMEOUT_MS,
    retryAfterSeconds: env.RETRY_AFTER_SECONDS,
    maxBatchRecords: env.PUBLISH_MAX_BATCH,
    lingerMs: env.PUBLISH_LINGER_MS,
    headersTimeoutMs: env.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: env.REQUEST_TIMEOUT_MS,
    maxConnections: env.MAX_CONNECTIONS,
    maxClientConnections: env.MAX_CLIENT_CONNECTIONS ?? clientConnectionShare(env.MAX_CONNECTIONS),
    listenSockets: env.LISTEN_SOCKETS,
    keepAliveTimeoutMs: env.KEEP_ALIVE_TIMEOUT_MS,
    maxInflightBodyBytes: env.MAX_INFLIGHT_BODY_BYTES,
    maxClientBodyBytes: env.MAX_CLIENT_BODY_BYTES,
    bodyIdleTimeoutMs: env.BODY_IDLE_TIMEOUT_MS,
    bodyTimeoutMs: env.BODY_TIMEOUT_MS,
    logLevel: env.LOG_LEVEL,
    logBufferBytes: env.LOG_BUFFER_BYTES,
  };
}
