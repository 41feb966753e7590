import type { Admin, Kafka, Producer } from '#plumbing/kafka/types.ts';
import { layoutFromMetadata, PartitionedSender, type TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import { createIdempotentProducer } from '#plumbing/kafka/producers.ts';
import { withTimeout } from '#plumbing/errors/with-timeout.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { IngressMetrics } from './metrics.ts';

export interface BrokerLinkOptions {
  kafka: Kafka;
  topic: string;
  logger: Logger;
  metrics: Pick<IngressMetrics, 'brokerAvailable'>;
  /** How long a connect or a metadata request may take before the probe gives up on it. */
  requestTimeoutMs: number;
  /** How often the broker is probed (readiness while up, reconnection while down). */
  probeIntervalMs: number;
  /** Told each time a probe fails: whatever waits for this broker is answered at once. */
  onDown: (reason: string) => void;
}

/**
 * The ingress's link to the broker: a probe every interval decides whether the broker is up (and
 * /readyz true), follows the topic's partition count, and builds the idempotent producer the publisher sends
 * with. A producer whose send failed is never reused: the publisher hands it back with
 * replaceProducer and the probe builds the next one at once.
 */
export class BrokerLink {
  private readonly options: BrokerLinkOptions;
  private readonly log: Logger;
  private currentProducer: Producer | undefined;
  private currentSender: PartitionedSender | undefined;
  /** Refreshed by every readiness probe (each second), so leader moves are followed. */
  private layout: TopicLayout = { partitionCount: 0 };
  private admin: Admin | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private probing: Promise<void> | undefined;
  private isUp = false;
  private closed = false;
  private error = 'not connected yet';

  constructor(options: BrokerLinkOptions) {
    this.options = options;
    this.log = options.logger;
  }

  get up(): boolean {
    return this.isUp;
  }

  /** Why the broker is down ('' while it is up). */
  get lastError(): string {
    return this.error;
  }

  get producer(): Producer | undefined {
    return this.currentProducer;
  }

  get sender(): PartitionedSender | undefined {
    return this.currentSender;
  }

  /** Probes once, then every probeIntervalMs; a broker that is down leaves the link down and probing. */
  async start(): Promise<void> {
    await this.probe();
    this.scheduleProbe();
  }

  probe(): Promise<void> {
    this.probing ??= this.runProbe().finally(() => {
      this.probing = undefined;
    });
    return this.probing;
  }

  /** Never reuse a producer after a failed or timed-out send; the probe builds the next one at once. */
  replaceProducer(reason: string, producer: Producer): void {
    if (producer !== this.currentProducer) return;
    this.currentProducer = undefined;
    this.currentSender = undefined;
    producer.disconnect().catch(() => {});
    this.log.warn({ reason }, 'publish failed; the producer is replaced');
    void this.probe();
  }

  /** No probe after this one; the producer stays until disconnect() (the publisher drains first). */
  async stopProbing(): Promise<void> {
    this.closed = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    await this.probing?.catch(() => {});
  }

  async disconnect(): Promise<void> {
    await this.currentProducer?.disconnect().catch(() => {});
    await this.admin?.disconnect().catch(() => {});
    this.currentProducer = undefined;
    this.currentSender = undefined;
    this.admin = undefined;
    this.isUp = false;
  }

  private markDown(reason: string, producer: Producer | undefined): void {
    if (this.isUp) this.log.warn({ reason }, 'broker unavailable; answering 503 until it is back');
    this.isUp = false;
    this.error = reason;
    this.options.metrics.brokerAvailable.set(0);
    if (producer && producer === this.currentProducer) {
      this.currentProducer = undefined;
      this.currentSender = undefined;
      producer.disconnect().catch(() => {});
    }
    this.options.onDown(reason);
  }

  private scheduleProbe(): void {
    if (this.closed) return;
    this.probeTimer = setTimeout(() => {
      void this.probe().finally(() => this.scheduleProbe());
    }, this.options.probeIntervalMs);
    this.probeTimer.unref();
  }

  private async runProbe(freshAdminRetry = true): Promise<void> {
    if (this.closed) return;
    const timeoutMs = this.options.requestTimeoutMs;
    try {
      if (!this.admin) {
        // A few quick retries: with one broker of several dead, the next attempt asks another broker.
        this.admin = this.options.kafka.admin({ retry: { retries: 3, initialRetryTime: 50, maxRetryTime: 500 } });
        await withTimeout(this.admin.connect(), timeoutMs, 'broker_request_timeout', 'admin connect');
      }
      // A metadata round trip for our topic: proves a broker answers and that the topic exists
      // with a leader for every partition (topics are never auto-created).
      const metadata = await withTimeout(
        this.admin.fetchTopicMetadata({ topics: [this.options.topic] }),
        timeoutMs,
        'broker_request_timeout',
        'topic metadata',
      );
      const partitions = metadata.topics[0]?.partitions ?? [];
      // One partition without a leader (a broker of several just died) fails only the requests
      // keyed to it, each with its own 503; the ingress is down only when no partition can be written.
      if (partitions.length === 0 || partitions.every((p) => p.leader < 0)) {
        throw new Error(`topic ${this.options.topic} has no partition with a leader`);
      }
      this.layout = layoutFromMetadata(partitions);
      if (!this.currentProducer) {
        // kafkajs warns that finite retries (shared/plumbing/kafka/client.ts) may break exactly-once; here a
        // producer whose send failed or timed out is never used again, and its replacement gets a
        // new producer id, so no sequence gap is carried over.
        const producer = createIdempotentProducer(this.options.kafka);
        try {
          await withTimeout(producer.connect(), timeoutMs, 'broker_request_timeout', 'producer connect');
        } catch (error) {
          producer.disconnect().catch(() => {});
          // The cluster answered metadata: only this connect failed (it may have picked a broker
          // that just died). Not an outage of the broker as a whole; the next probe tries again.
          if (!this.isUp) throw error;
          this.log.warn({ err: error }, 'producer connect failed; trying again at the next probe');
          return;
        }
        if (this.closed) {
          await producer.disconnect().catch(() => {});
          return;
        }
        this.currentProducer = producer;
        this.currentSender = new PartitionedSender(producer, async () => this.layout);
      }
      if (!this.isUp) {
        this.isUp = true;
        this.error = '';
        this.options.metrics.brokerAvailable.set(1);
        this.log.info('broker available; publishing');
      }
    } catch (error) {
      const admin = this.admin;
      this.admin = undefined;
      admin?.disconnect().catch(() => {});
      // Up until now: the admin's connection may be the one to a broker that just died (kafkajs
      // keeps asking the broker it is connected to). One more try at once on a fresh admin, which
      // bootstraps from the brokers that answer, before the ingress calls the whole cluster down.
      if (this.isUp && freshAdminRetry) return this.runProbe(false);
      this.markDown(`probe failed: ${(error as Error).message}`, this.currentProducer);
    }
  }
}
