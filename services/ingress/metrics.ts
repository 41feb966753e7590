import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { collectProcessMetrics } from '#plumbing/observability/process-metrics.ts';

export interface IngressMetrics {
  requests: Counter<'source' | 'event_type' | 'status'>;
  signatureFailures: Counter<'source' | 'reason'>;
  signatureVerifications: Counter<'source' | 'secret_id'>;
  secretRetireAfter: Gauge<'source' | 'secret_id'>;
  clockSkew: Histogram<'source'>;
  publishLatency: Histogram;
  publishBatchSize: Histogram;
  requestDuration: Histogram<'status'>;
  brokerAvailable: Gauge;
  overloadRefusals: Counter<'reason'>;
  eventRefusals: Counter<'source' | 'reason'>;
  inflightBodyBytes: Gauge;
  openConnections: Gauge;
  sourceLimited: Counter<'source' | 'limit'>;
  configVersion: Gauge;
  configSourceHealthy: Gauge;
}

export interface IngressReadings {
  /** Body bytes buffered across requests right now (read at scrape time only). */
  inflightBodyBytes: () => number;
  /** Client connections open right now, across the listening sockets (read at scrape time only). */
  openConnections?: () => number;
  /**
   * The configuration served (read at scrape time): its version and whether the last check reached
   * Postgres. Sources from the file: version 0, healthy.
   */
  config?: () => { version: number; healthy: boolean };
}

/** Registers on the registry it is given (one per service instance), never the global one. */
export function createIngressMetrics(registry: Registry, readings?: IngressReadings): IngressMetrics {
  const registers = [registry];
  collectProcessMetrics(registry);
  return {
    requests: new Counter({
      name: 'webhook_requests_total',
      help: 'Webhook requests by source, event type and HTTP status',
      labelNames: ['source', 'event_type', 'status'],
      registers,
    }),
    signatureFailures: new Counter({
      name: 'webhook_signature_failures_total',
      help: 'Requests refused before or during signature verification, by reason',
      labelNames: ['source', 'reason'],
      registers,
    }),
    signatureVerifications: new Counter({
      name: 'webhook_signature_verifications_total',
      help: 'Successful verifications by the secret that matched; retire a secret once its count stops growing',
      labelNames: ['source', 'secret_id'],
      registers,
    }),
    secretRetireAfter: new Gauge({
      name: 'webhook_secret_retire_after_timestamp_seconds',
      help: 'A secret being rotated out: its retireAfter, after which it no longer verifies (signature failures, reason secret_retired)',
      labelNames: ['source', 'secret_id'],
      registers,
    }),
    clockSkew: new Histogram({
      name: 'webhook_clock_skew_seconds',
      help: 'Receive time minus the signed timestamp (negative: the sender clock is ahead)',
      labelNames: ['source'],
      buckets: [-600, -300, -60, -10, -1, 0, 1, 5, 10, 30, 60, 120, 300, 600],
      registers,
    }),
    publishLatency: new Histogram({
      name: 'webhook_publish_latency_seconds',
      help: 'Time from a batch send to the broker ack (acks=all)',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    publishBatchSize: new Histogram({
      name: 'webhook_publish_batch_size',
      help: 'Records per batch send',
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500],
      registers,
    }),
    requestDuration: new Histogram({
      name: 'webhook_request_duration_seconds',
      help: 'Time from request start to the response, by status',
      labelNames: ['status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    brokerAvailable: new Gauge({
      name: 'webhook_broker_available',
      help: '1 while the producer is connected and acks arrive, 0 while answering 503',
      registers,
    }),
    overloadRefusals: new Counter({
      name: 'webhook_overload_refusals_total',
      help:
        "Connections closed at accept over MAX_CONNECTIONS (max_connections), and closed or answered 429 over a client address's MAX_CLIENT_CONNECTIONS (client_connections); requests answered 503 over MAX_INFLIGHT_BODY_BYTES (inflight_body_bytes), " +
        '429 over MAX_CLIENT_BODY_BYTES (client_body_bytes), 408 past HEADERS_TIMEOUT_MS (headers_timeout), REQUEST_TIMEOUT_MS (request_timeout), ' +
        'BODY_IDLE_TIMEOUT_MS (body_idle_timeout) or BODY_TIMEOUT_MS (body_timeout)',
      labelNames: ['reason'],
      registers,
    }),
    eventRefusals: new Counter({
      name: 'webhook_event_refusals_total',
      help: 'Verified, well-formed events refused for what they say, by reason (occurred_at_in_future: dated too far ahead of this clock)',
      labelNames: ['source', 'reason'],
      registers,
    }),
    inflightBodyBytes: new Gauge({
      name: 'webhook_inflight_body_bytes',
      help: 'Request body bytes buffered right now across requests (counted as they arrive)',
      registers,
      collect() {
        if (readings) this.set(readings.inflightBodyBytes());
      },
    }),
    openConnections: new Gauge({
      name: 'webhook_open_connections',
      help: 'Client connections open right now on the webhook port (MAX_CONNECTIONS caps them)',
      registers,
      collect() {
        this.set(readings?.openConnections?.() ?? 0);
      },
    }),
    sourceLimited: new Counter({
      name: 'webhook_source_limited_total',
      help: "Verified requests answered 429 over their source's limits on this ingress, by limit (requests or bytes per second)",
      labelNames: ['source', 'limit'],
      registers,
    }),
    configVersion: new Gauge({
      name: 'bridge_config_version',
      help: 'The sources configuration version this instance serves (-1: not loaded yet; 0: sources from the file)',
      registers,
      collect() {
        this.set(readings?.config?.().version ?? 0);
      },
    }),
    configSourceHealthy: new Gauge({
      name: 'bridge_config_source_healthy',
      help: "1 while this instance's last check of the sources reached Postgres, 0 while it serves what it has without it (1 with sources from the file)",
      registers,
      collect() {
        this.set(readings?.config?.().healthy === false ? 0 : 1);
      },
    }),
  };
}
