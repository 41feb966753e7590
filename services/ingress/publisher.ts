import type { Kafka, Message } from '#plumbing/kafka/types.ts';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import { BrokerLink } from './broker-link.ts';
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
 * next batch fill while the previous one waits for its ack. Whether the broker is up, and the
 * producer each batch goes out on, come from the BrokerLink (broker-link.ts).
 */
export class BatchingPublisher {
  private readonly options: PublisherOptions;
  private readonly log: Logger;
  private readonly link: BrokerLink;
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
  private closed = false;

  constructor(options: PublisherOptions) {
    this.options = options;
    this.log = options.logger.child({ component: 'publisher' });
    this.link = new BrokerLink({
      kafka: options.kafka,
      topic: options.topic,
      logger: this.log,
      metrics: options.metrics,
      requestTimeoutMs: options.ackTimeoutMs,
      probeIntervalMs: options.probeIntervalMs,
      onDown: (reason) => this.failQueued(reason),
    });
  }

  get available(): boolean {
    return this.link.up && !this.closed;
  }

  get status(): string {
    return this.available ? 'ok' : this.closed ? 'shutting down' : this.link.lastError;
  }

  /** Connects once; a broker that is down leaves the publisher unavailable and probing, not failed. */
  async start(): Promise<void> {
    await this.link.start();
  }

  publish(record: PublishRecord): Promise<void> {
    if (this.closed) return Promise.reject(new PublishError('shutting_down', 'ingress is shutting down'));
    // Fail fast while the broker is known to be down: the caller answers 503 at once instead of
    // holding the connection for the whole ack timeout.
    if (!this.link.up) return Promise.reject(new PublishError('broker_unavailable', `broker unavailable: ${this.link.lastError}`));
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
    if (this.link.up && !this.link.producer) await this.link.probe();
    const producer = this.link.producer;
    const sender = this.link.sender;
    if (!producer || !sender || !this.link.up) {
      for (const p of batch) this.settle(p, new PublishError('broker_unavailable', `broker unavailable: ${this.link.lastError}`));
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
        sender.send({ topic: this.options.topic, messages, acks: -1 }).then(() => 'acked' as const),
        timeout,
      ]);
      if (outcome === 'timeout') {
        // A producer that cannot get an ack in time may be stuck in kafkajs's retry loop; a new
        // producer (new producer id) is the reliable way out. One broker of several down makes
        // only its partitions time out: the probe, not this batch, decides whether the broker as a
        // whole is unavailable (and /readyz false).
        for (const p of batch) this.settle(p, new PublishError('ack_timeout', `no ack within ${this.options.ackTimeoutMs} ms`));
        this.link.replaceProducer(`no ack within ${this.options.ackTimeoutMs} ms`, producer);
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
          this.link.replaceProducer('batch too large for the broker', producer);
          return;
        }
        for (const p of batch) this.settle(p, new PublishError('record_too_large', 'record too large for the broker', error));
        return;
      }
      for (const p of batch) this.settle(p, new PublishError('broker_unavailable', `publish failed: ${(error as Error).message}`, error));
      this.link.replaceProducer((error as Error).message, producer);
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

  /** The broker went down: records queued behind the failed batch would only wait for their timeout. */
  private failQueued(reason: string): void {
    for (const p of this.queue) this.settle(p, new PublishError('broker_unavailable', `broker unavailable: ${reason}`));
    this.queue = [];
  }

  /** Sends everything already accepted, waits for the acks, then disconnects. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.link.stopProbing();
    while (this.inFlight || this.queue.some((p) => !p.settled)) {
      if (!this.inFlight) this.flush();
      await this.inFlight;
    }
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    await this.link.disconnect();
  }
}

function firstUnsettled(list: readonly Pending[]): Pending | undefined {
  for (const p of list) if (!p.settled) return p;
  return undefined;
}
