import type { Admin, Kafka, Message, Producer } from '#plumbing/kafka/types.ts';
import { layoutFromMetadata, PartitionedSender, type TopicLayout } from '#plumbing/kafka/partitioned-send.ts';
import { createIdempotentProducer } from '#plumbing/kafka/producers.ts';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import { withTimeout } from '#plumbing/errors/with-timeout.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { IngressMetrics } from './metrics.ts';

export interface PublishRecord {
  key: string;
  value: Buffer;
  headers: Record<string, string>;
}

export interface PublisherOptions {
  kafka: Kafka;
  topic: string;
  logger: Logger;
  metrics: IngressMetrics;
  /** A request that has no ack after this long gets a 503. */
  ackTimeoutMs: number;
  maxBatchRecords: number;
  maxBatchBytes: number;
  /** How long the first record of an idle period waits for company before it is sent. */
  lingerMs: number;
  /** How often the broker is probed (readiness while up, reconnection while down). */
  probeIntervalMs: number;
}

// A subset of ErrorCode: the `code` override below does not compile otherwise.
export type PublishErrorCode = 'broker_unavailable' | 'ack_timeout' | 'record_too_large' | 'shutting_down';

export class PublishError extends BridgeError {
  override readonly code: PublishErrorCode;
  constructor(code: PublishErrorCode, message: string, cause?: unknown) {
    super(code, message, { retryable: code !== 'record_too_large', cause });
    this.code = code;
  }
}

interface Pending {
  record: PublishRecord;
  bytes: number;
  resolve: () => void;
  reject: (error: PublishError) => void;
  /** performance.now() after which the caller gets ack_timeout. */
  deadline: number;
  settled: boolean;
  /** Sent in a batch of its own: its batch was refused as too large for the broker. */
  alone?: boolean;
}

const RECORD_OVERHEAD_BYTES = 100;

/**
 * Coalesces concurrent publishes into one batch send at a time (kafkajs has no linger) and
 * resolves each caller only after the broker acknowledged its record (acks=all).
 * One batch in flight keeps the idempotent producer on its safe path (kafkajs#598) and lets the
 * next batch fill while the previous one waits for its ack.
 */
export class BatchingPublisher {
  private readonly options: PublisherOptions;
  private readonly log: Logger;
  private producer: Producer | undefined;
  private sender: PartitionedSender | undefined;
  /** Refreshed by every readiness probe (each second), so leader moves are followed. */
  private layout: TopicLayout = { partitionCount: 0, leaders: new Map() };
  private admin: Admin | undefined;
  private queue: Pending[] = [];
  private inFlight: Promise<void> | undefined;
  /** The records of the batch in flight (older than everything in the queue). */
  private inFlightBatch: Pending[] = [];
  /**
   * One timer for every request's ack deadline instead of a timer per request: requests enter
   * in order with the same timeout, so the oldest unsettled one (head of the batch in flight,
   * else of the queue) always has the earliest deadline.
   */
  private deadlineTimer: NodeJS.Timeout | undefined;
  private readonly onDeadline = (): void => this.expireDeadlines();
  private lingerTimer: NodeJS.Timeout | undefined;
  private lingerImmediate: NodeJS.Immediate | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private probing: Promise<void> | undefined;
  private up = false;
  private closed = false;
  private lastError = 'not connected yet';

  constructor(options: PublisherOptions) {
    this.options = options;
    this.log = options.logger.child({ component: 'publisher' });
  }

  get available(): boolean {
    return this.up && !this.closed;
  }

  get status(): string {
    return this.available ? 'ok' : this.closed ? 'shutting down' : this.lastError;
  }

  /** Connects once; a broker that is down leaves the publisher unavailable and probing, not failed. */
  async start(): Promise<void> {
    await this.probe();
    this.scheduleProbe();
  }

  publish(record: PublishRecord): Promise<void> {
    if (this.closed) return Promise.reject(new PublishError('shutting_down', 'ingress is shutting down'));
    // Fail fast while the broker is known to be down: the caller answers 503 at once instead of
    // holding the connection for the whole ack timeout.
    if (!this.up) return Promise.reject(new PublishError('broker_unavailable', `broker unavailable: ${this.lastError}`));
    return new Promise<void>((resolve, reject) => {
      this.queue.push({
        record,
        bytes: record.value.length + record.key.length + RECORD_OVERHEAD_BYTES,
        resolve,
        reject,
        deadline: performance.now() + this.options.ackTimeoutMs,
        settled: false,
      });
      this.deadlineTimer ??= this.armDeadline();
      this.schedule();
    });
  }

  private armDeadline(): NodeJS.Timeout | undefined {
    const oldest = firstUnsettled(this.inFlightBatch) ?? firstUnsettled(this.queue);
    if (oldest === undefined) return undefined;
    const timer = setTimeout(this.onDeadline, Math.max(0, Math.ceil(oldest.deadline - performance.now())));
    timer.unref();
    return timer;
  }

  private expireDeadlines(): void {
    this.deadlineTimer = undefined;
    const now = performance.now();
    for (const list of [this.inFlightBatch, this.queue]) {
      for (const p of list) {
        if (p.settled) continue;
        if (p.deadline > now) break;
        this.settle(p, new PublishError('ack_timeout', `no ack within ${this.options.ackTimeoutMs} ms`));
      }
    }
    this.deadlineTimer = this.armDeadline();
  }

  private schedule(): void {
    if (this.inFlight || this.queue.length === 0) return;
    if (this.queue.length >= this.options.maxBatchRecords) {
      this.flush();
      return;
    }
    // 0: at the end of this turn of the event loop (the requests read in the same turn still go
    // together), not setTimeout's 1 ms minimum.
    if (this.options.lingerMs === 0) {
      if (this.lingerImmediate === undefined)
        this.lingerImmediate = setImmediate(() => {
          this.lingerImmediate = undefined;
          this.flush();
        });
      return;
    }
    this.lingerTimer ??= setTimeout(() => this.flush(), this.options.lingerMs);
  }

  private flush(): void {
    if (this.lingerTimer) {
      clearTimeout(this.lingerTimer);
      this.lingerTimer = undefined;
    }
    if (this.inFlight) return;
    const batch = this.takeBatch();
    if (batch.length === 0) return;
    this.inFlightBatch = batch;
    this.inFlight = this.send(batch).finally(() => {
      this.inFlight = undefined;
      this.inFlightBatch = [];
      // Whatever queued up while this batch waited for its ack goes out now, without lingering.
      if (this.queue.length > 0) this.flush();
    });
  }

  private takeBatch(): Pending[] {
    const batch: Pending[] = [];
    let bytes = 0;
    while (this.queue.length > 0 && batch.length < this.options.maxBatchRecords) {
      const next = this.queue[0]!;
      if (next.settled) {
        this.queue.shift();
        continue;
      }
      if (next.alone && batch.length > 0) break;
      // A broker refuses a record batch above message.max.bytes (default ~1 MiB) as a whole, so
      // big records travel alone instead of failing their neighbours.
      if (batch.length > 0 && bytes + next.bytes > this.options.maxBatchBytes) break;
      batch.push(next);
      bytes += next.bytes;
      this.queue.shift();
      if (next.alone) break;
    }
    return batch;
  }

  private async send(batch: Pending[]): Promise<void> {
    // A producer replaced after a failed batch: the probe that builds the next one is under way.
    if (this.up && !this.producer) await this.probe();
    const producer = this.producer;
    const sender = this.sender;
    if (!producer || !sender || !this.up) {
      for (const p of batch) this.settle(p, new PublishError('broker_unavailable', `broker unavailable: ${this.lastError}`));
      return;
    }
    const started = performance.now();
    const messages: Message[] = batch.map((p) => ({ key: p.record.key, value: p.record.value, headers: p.record.headers }));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.options.ackTimeoutMs);
    });
    try {
      const outcome = await Promise.race([
        // One send per partition leader: a send() spanning leaders can resolve without part of it (kafkajs#1303).
        sender.send({ topic: this.options.topic, messages, acks: -1 }).then(() => 'acked' as const),
        timeout,
      ]);
      if (outcome === 'timeout') {
        // A producer that cannot get an ack in time may be stuck in kafkajs's retry loop; a new
        // producer (new producer id) is the reliable way out. One broker of several down makes
        // only its partitions time out: the probe, not this batch, decides whether the broker as a
        // whole is unavailable (and /readyz false).
        for (const p of batch) this.settle(p, new PublishError('ack_timeout', `no ack within ${this.options.ackTimeoutMs} ms`));
        this.replaceProducer(`no ack within ${this.options.ackTimeoutMs} ms`, producer);
        return;
      }
      const seconds = (performance.now() - started) / 1000;
      this.options.metrics.publishLatency.observe(seconds);
      this.options.metrics.publishBatchSize.observe(batch.length);
      for (const p of batch) this.settle(p);
    } catch (error) {
      const type = (error as { type?: string }).type ?? (error as { cause?: { type?: string } }).cause?.type;
      if (type === 'MESSAGE_TOO_LARGE' || type === 'RECORD_LIST_TOO_LARGE') {
        // The broker refuses a partition's record batch as a whole (the topic's max.message.bytes
        // may be below maxBatchBytes): only a record refused on its own is too large. The others
        // go again, each alone, ahead of what queued since (the oldest deadlines stay first).
        // Records of other partitions in the same request may already be written: those are
        // published twice, which the worker's deduplication absorbs (at-least-once).
        // kafkajs has rolled back the sequence numbers of every partition of the request, also of
        // those the broker wrote: on this producer the next record there would reuse a written
        // record's sequence and be acknowledged as its duplicate without being written. A new
        // producer (new producer id) sends them. One record alone touched one partition, whose
        // rollback is exact: its producer stays.
        if (batch.length > 1) {
          const retry = batch.filter((p) => !p.settled);
          for (const p of retry) p.alone = true;
          this.queue.unshift(...retry);
          this.log.warn({ records: retry.length }, 'batch too large for the broker; sending its records one by one');
          this.replaceProducer('batch too large for the broker', producer);
          return;
        }
        for (const p of batch) this.settle(p, new PublishError('record_too_large', 'record too large for the broker', error));
        return;
      }
      for (const p of batch) this.settle(p, new PublishError('broker_unavailable', `publish failed: ${(error as Error).message}`, error));
      this.replaceProducer((error as Error).message, producer);
    } finally {
      clearTimeout(timer);
    }
  }

  private settle(pending: Pending, error?: PublishError): void {
    if (pending.settled) return;
    pending.settled = true;
    if (error) pending.reject(error);
    else pending.resolve();
  }

  /** Never reuse a producer after a failed or timed-out send; the probe builds the next one at once. */
  private replaceProducer(reason: string, producer: Producer): void {
    if (producer !== this.producer) return;
    this.producer = undefined;
    this.sender = undefined;
    producer.disconnect().catch(() => {});
    this.log.warn({ reason }, 'publish failed; the producer is replaced');
    void this.probe();
  }

  private markDown(reason: string, producer: Producer | undefined): void {
    if (this.up) this.log.warn({ reason }, 'broker unavailable; answering 503 until it is back');
    this.up = false;
    this.lastError = reason;
    this.options.metrics.brokerAvailable.set(0);
    if (producer && producer === this.producer) {
      this.producer = undefined;
      this.sender = undefined;
      producer.disconnect().catch(() => {});
    }
    // Records queued behind the failed batch would only wait for their timeout.
    for (const p of this.queue) this.settle(p, new PublishError('broker_unavailable', `broker unavailable: ${reason}`));
    this.queue = [];
  }

  private scheduleProbe(): void {
    if (this.closed) return;
    this.probeTimer = setTimeout(() => {
      void this.probe().finally(() => this.scheduleProbe());
    }, this.options.probeIntervalMs);
    this.probeTimer.unref();
  }

  private probe(): Promise<void> {
    this.probing ??= this.runProbe().finally(() => {
      this.probing = undefined;
    });
    return this.probing;
  }

  private async runProbe(freshAdminRetry = true): Promise<void> {
    if (this.closed) return;
    try {
      if (!this.admin) {
        // A few quick retries: with one broker of several dead, the next attempt asks another broker.
        this.admin = this.options.kafka.admin({ retry: { retries: 3, initialRetryTime: 50, maxRetryTime: 500 } });
        await withTimeout(this.admin.connect(), this.options.ackTimeoutMs, 'broker_request_timeout', 'admin connect');
      }
      // A metadata round trip for our topic: proves a broker answers and that the topic exists
      // with a leader for every partition (topics are never auto-created).
      const metadata = await withTimeout(
        this.admin.fetchTopicMetadata({ topics: [this.options.topic] }),
        this.options.ackTimeoutMs,
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
      if (!this.producer) {
        // kafkajs warns that finite retries (shared/plumbing/kafka/client.ts) may break exactly-once; here a
        // producer whose send failed or timed out is never used again, and its replacement gets a
        // new producer id, so no sequence gap is carried over.
        const producer = createIdempotentProducer(this.options.kafka);
        try {
          await withTimeout(producer.connect(), this.options.ackTimeoutMs, 'broker_request_timeout', 'producer connect');
        } catch (error) {
          producer.disconnect().catch(() => {});
          // The cluster answered metadata: only this connect failed (it may have picked a broker
          // that just died). Not an outage of the broker as a whole; the next probe tries again.
          if (!this.up) throw error;
          this.log.warn({ err: error }, 'producer connect failed; trying again at the next probe');
          return;
        }
        if (this.closed) {
          await producer.disconnect().catch(() => {});
          return;
        }
        this.producer = producer;
        this.sender = new PartitionedSender(producer, async () => this.layout);
      }
      if (!this.up) {
        this.up = true;
        this.lastError = '';
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
      if (this.up && freshAdminRetry) return this.runProbe(false);
      this.markDown(`probe failed: ${(error as Error).message}`, this.producer);
    }
  }

  /** Sends everything already accepted, waits for the acks, then disconnects. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    await this.probing?.catch(() => {});
    while (this.inFlight || this.queue.some((p) => !p.settled)) {
      if (!this.inFlight) this.flush();
      await this.inFlight;
    }
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    await this.producer?.disconnect().catch(() => {});
    await this.admin?.disconnect().catch(() => {});
    this.producer = undefined;
    this.sender = undefined;
    this.admin = undefined;
    this.up = false;
  }
}

function firstUnsettled(list: readonly Pending[]): Pending | undefined {
  for (const p of list) if (!p.settled) return p;
  return undefined;
}
