import type { Producer } from 'kafkajs';
import type { ErrorCode } from '#plumbing/errors/bridge-error.ts';
import { withTimeout } from '#plumbing/errors/with-timeout.ts';
import type { Logger } from '#plumbing/logging/logger.ts';

export interface RecoveringProducerOptions {
  /** Builds a new (not yet connected) producer; called again after every failed or timed-out use. */
  create: () => Producer;
  /** Bounds connect() of a new producer (its transactional init, if any, happens on first use). */
  connectTimeoutMs: number;
  logger: Logger;
  /** For log lines: which producer this is (relay, failures, ...). */
  name: string;
}

/**
 * A producer that is never reused after a failed or timed-out send.
 *
 * kafkajs cannot cancel a send: after our timeout it keeps retrying it, and after its own give-up
 * it rolls the idempotent sequence number back although the broker may already have appended the
 * batch. The next send on that producer is then either refused for good
 * (OUT_OF_ORDER_SEQUENCE_NUMBER) or acknowledged as a duplicate of the old batch and never written.
 * A fresh producer has a fresh producer id (or, with a transactional id, bumps the epoch, which
 * fences every request the old one still has in flight), so neither can happen. The old one is
 * disconnected in the background; whatever it still sends is at most a duplicate of what the next
 * send carries (non-transactional) or rejected by the broker (transactional).
 *
 * Uses run one at a time, in call order. kafkajs rolls a partition's sequence back when a produce
 * request times out and releases its per-broker lock before it retries that request, so a second
 * send() running meanwhile on the same producer takes the rolled-back sequence: the broker, which
 * did append the first batch, answers the second as its duplicate and never writes it
 * (test/failures/racing-sends.test.ts). One use in flight leaves no second send to take it, and a
 * producer that failed is replaced before the next use starts.
 */
export class RecoveringProducer {
  readonly #o: RecoveringProducerOptions;
  #current: Promise<Producer> | undefined;
  #generation = 0;
  #closed = false;
  /** Settles when the last use queued so far has finished: the next one starts after it. */
  #tail: Promise<void> = Promise.resolve();

  constructor(options: RecoveringProducerOptions) {
    this.#o = options;
  }

  /** How many producers were discarded after a failure (for tests and metrics). */
  get replacements(): number {
    return Math.max(0, this.#generation - 1);
  }

  /** Connects the first producer now (start-up fails fast when the broker is unreachable). */
  async connect(): Promise<void> {
    const current = this.#producer();
    try {
      await current;
    } catch (error) {
      this.#discard(current, error, `${this.#o.name} producer connect`);
      throw error;
    }
  }

  /** Discards the current producer (if any): the next use gets a new one. `quiet`: nothing failed, no warning. */
  replace(error: unknown, what: string, quiet = false): void {
    if (this.#current !== undefined) this.#discard(this.#current, error, what, quiet);
  }

  /**
   * Runs `work` on the current producer once every earlier use has finished, the wait and the work
   * together bounded by `timeoutMs`. When the work fails or times out the producer is discarded:
   * the next use gets a new one. A use whose time runs out while it waits sends nothing and leaves
   * the producer as it is.
   */
  async use<T>(work: (producer: Producer) => Promise<T>, timeoutMs: number, code: ErrorCode, what: string): Promise<T> {
    const deadline = performance.now() + timeoutMs;
    const previous = this.#tail;
    let finished!: () => void;
    this.#tail = new Promise<void>((resolve) => (finished = resolve));
    try {
      await withTimeout(previous, timeoutMs, code, `${what} (waiting for the ${this.#o.name} producer's previous send)`);
    } catch (error) {
      // Still after the use in flight: the one queued behind this one must not overtake it.
      void previous.then(finished);
      throw error;
    }
    try {
      return await this.#run(work, Math.max(1, Math.ceil(deadline - performance.now())), code, what);
    } finally {
      finished();
    }
  }

  async #run<T>(work: (producer: Producer) => Promise<T>, timeoutMs: number, code: ErrorCode, what: string): Promise<T> {
    const current = this.#producer();
    let producer: Producer;
    try {
      producer = await current;
    } catch (error) {
      this.#discard(current, error, what);
      throw error;
    }
    try {
      return await withTimeout(work(producer), timeoutMs, code, what);
    } catch (error) {
      this.#discard(current, error, what);
      throw error;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const current = this.#current;
    this.#current = undefined;
    if (current) await current.then((p) => p.disconnect()).catch(() => {});
  }

  #producer(): Promise<Producer> {
    if (this.#closed) return Promise.reject(new Error(`${this.#o.name} producer is closed`));
    if (this.#current === undefined) {
      const producer = this.#o.create();
      this.#generation += 1;
      const connecting = withTimeout(
        producer.connect(),
        this.#o.connectTimeoutMs,
        'producer_connect_timeout',
        `${this.#o.name} producer connect`,
      ).then(
        () => producer,
        (error: unknown) => {
          void producer.disconnect().catch(() => {});
          throw error;
        },
      );
      // A rejection is handled by use(); this keeps a connect failure from being unhandled meanwhile.
      connecting.catch(() => {});
      this.#current = connecting;
    }
    return this.#current;
  }

  #discard(which: Promise<Producer>, error: unknown, what: string, quiet = false): void {
    if (this.#current !== which) return;
    this.#current = undefined;
    if (!quiet)
      this.#o.logger.warn(
        { err: error, producer: this.#o.name, generation: this.#generation },
        `${what} failed; the producer is replaced before the next send`,
      );
    void which.then((p) => p.disconnect()).catch(() => {});
  }
}
