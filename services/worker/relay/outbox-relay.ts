// The relay as the worker runs it: a loop of passes from start() to stop(), then the stop drain,
// moving through the named states of state.ts; what one pass does is pass.ts's.
import { RelayPass, type RelayPassOptions } from './pass.ts';
import { isRunning, moveRelay, type RelayState } from './state.ts';
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
  #state: RelayState = { name: 'new' };
  #loop: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;

  constructor(options: OutboxRelayOptions) {
    this.#o = options;
    this.#pass = new RelayPass(options);
  }

  get running(): boolean {
    return isRunning(this.#state);
  }

  start(): void {
    if (isRunning(this.#state)) return;
    this.#move({ name: 'passing', nudged: false });
    this.#loop = this.#run();
  }

  /** Called after an apply transaction commits, so applied records go out without waiting a poll. */
  nudge(): void {
    const state = this.#state;
    if (state.name === 'passing') state.nudged = true;
    else if (state.name === 'polling') state.wake();
  }

  /**
   * Publishes what was applied before the stop (bounded: see STOP_DRAIN_MS), then releases the
   * leadership and closes the producer. Whatever is left, the next leader publishes.
   */
  stop(): Promise<void> {
    const state = this.#state;
    if (state.name === 'new' || isRunning(state)) {
      this.#move({ name: 'stopping' });
      if (state.name === 'polling' || state.name === 'backing-off') state.wake();
      this.#stopped = this.#finish();
    }
    return this.#stopped!;
  }

  /** One pass: publishes at most one batch. Returns how many rows were published. */
  async publishOnce(): Promise<number> {
    const pass = await this.#pass.run();
    return pass.kind === 'published' ? pass.count : 0;
  }

  #move(to: RelayState): void {
    this.#state = moveRelay(this.#state, to);
  }

  /** Read through a call, so that a check after an await is not narrowed by one before it. */
  #stopping(): boolean {
    return this.#state.name === 'stopping';
  }

  async #run(): Promise<void> {
    let backoffMs = 0;
    for (;;) {
      this.#move({ name: 'passing', nudged: false });
      try {
        await this.#pass.run();
        backoffMs = 0;
      } catch (error) {
        backoffMs = Math.min(backoffMs === 0 ? 200 : backoffMs * 2, 5_000);
        this.#o.logger.warn({ err: error, backoff_ms: backoffMs }, 'outbox relay pass failed');
      }
      if (this.#stopping()) return;
      if (backoffMs > 0) await this.#wait('backing-off', backoffMs);
      else if (!this.#pass.more && !this.#nudged()) await this.#wait('polling', this.#o.pollMs);
      if (this.#stopping()) return;
    }
  }

  /** Whether a nudge came during the pass that just ended. */
  #nudged(): boolean {
    const state = this.#state;
    if (state.name !== 'passing') throw new Error(`outbox relay: a pass ended in state '${state.name}'`);
    return state.nudged;
  }

  #wait(name: 'polling' | 'backing-off', ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(wake, ms);
      function wake() {
        clearTimeout(timer);
        resolve();
      }
      this.#move({ name, wake });
    });
  }

  async #finish(): Promise<void> {
    await this.#loop;
    // A relay that never ran (tests drive publishOnce themselves) has nothing of its own to finish.
    if (this.#loop !== undefined) {
      this.#move({ name: 'draining' });
      await drainBeforeStop({
        pool: this.#o.pool,
        logger: this.#o.logger,
        drainMs: this.#o.stopDrainMs ?? STOP_DRAIN_MS,
        pollMs: this.#o.pollMs,
        pass: () => this.#pass.run(),
      });
    }
    this.#move({ name: 'releasing' });
    await this.#o.leadership.release();
    await this.#o.producer.close();
    this.#move({ name: 'stopped' });
  }
}
