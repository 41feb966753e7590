import { RelayPass, type RelayPassOptions } from './pass.ts';
import { drainBeforeStop, STOP_DRAIN_MS } from './stop-drain.ts';

/** What the worker needs from its running relay. */
export interface RelayHandle {
  /** False once the relay has stopped; readiness reports it. */
  readonly running: boolean;
  /** An apply transaction committed: publish without waiting for the next poll. */
  nudge(): void;
  /** Publishes what is in flight, then stops. */
  stop(): Promise<void>;
}

export interface OutboxRelayOptions extends RelayPassOptions {
  pollMs: number;
  /** How long stop() goes on publishing what was applied before it (default STOP_DRAIN_MS; 0: not at all). */
  stopDrainMs?: number;
}

/**
 * Publishes applied_outbox rows to the applied topic in (tx, id) order, one Kafka transaction per
 * batch, and then moves its cursor past them (one applied_outbox_batches row per batch; migration
 * 0002 explains the order). Only the leader publishes (a session advisory lock), and a replaced or
 * former leader's producer is fenced, so rows of one resource key never land out of order. A crash
 * before the cursor moves republishes the same stored bytes and headers, in the same order, which
 * downstream sees as an identical record. So does a commit the relay gave up on that the broker
 * still carried out (its EndTxn was in flight when the send timeout fired, e.g. at a frozen broker):
 * the batch appears twice, whole and in order (test/relay/relay-fencing.test.ts). Subscribers read
 * committed records (kafkajs's default; set isolation.level=read_committed in Java clients): an
 * aborted attempt is never seen.
 */
export class OutboxRelay {
  readonly #o: OutboxRelayOptions;
  readonly #pass: RelayPass;
  #running = false;
  #loop: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #nudged = false;

  constructor(options: OutboxRelayOptions) {
    this.#o = options;
    this.#pass = new RelayPass(options);
  }

  get running(): boolean {
    return this.#running;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** Called after an apply transaction commits, so applied records go out without waiting a poll. */
  nudge(): void {
    this.#nudged = true;
    this.#wake?.();
  }

  /**
   * Publishes what was applied before the stop (bounded: see STOP_DRAIN_MS), then releases the
   * leadership and closes the producer. Whatever is left, the next leader publishes.
   */
  stop(): Promise<void> {
    this.#running = false;
    this.#wake?.();
    return (this.#stopped ??= (async () => {
      await this.#loop;
      // A relay that never ran (tests drive publishOnce themselves) has nothing of its own to finish.
      if (this.#loop !== undefined) {
        await drainBeforeStop({
          pool: this.#o.pool,
          logger: this.#o.logger,
          drainMs: this.#o.stopDrainMs ?? STOP_DRAIN_MS,
          pollMs: this.#o.pollMs,
          pass: () => this.#pass.run(),
        });
      }
      await this.#o.leadership.release();
      await this.#o.producer.close();
    })());
  }

  /** One pass: publishes at most one batch. Returns how many rows were published. */
  async publishOnce(): Promise<number> {
    const pass = await this.#pass.run();
    return pass.kind === 'published' ? pass.count : 0;
  }

  async #run(): Promise<void> {
    let backoffMs = 0;
    while (this.#running) {
      try {
        this.#nudged = false;
        await this.publishOnce();
        backoffMs = 0;
      } catch (error) {
        backoffMs = Math.min(backoffMs === 0 ? 200 : backoffMs * 2, 5_000);
        this.#o.logger.warn({ err: error, backoff_ms: backoffMs }, 'outbox relay pass failed');
      }
      if (!this.#running) break;
      if (backoffMs > 0) await this.#sleep(backoffMs, false);
      else if (!this.#pass.more && !this.#nudged) await this.#sleep(this.#o.pollMs, true);
    }
  }

  #sleep(ms: number, wakeOnNudge: boolean): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        if (wakeOnNudge || !this.#running) done();
      };
    });
  }
}
