export type BreakerState = 'closed' | 'open' | 'half_open';

/**
 * Opens after `failureThreshold` failures in a row and refuses requests for `cooldownMs`; then lets
 * one trial request through (half open): its success closes the breaker, its failure opens it again.
 * Written here rather than taken from opossum: opossum wraps the call (its own timeout, fallback,
 * event emitter, rolling percentage windows) where the client needs one yes/no and two callbacks,
 * and an injected clock keeps the tests free of sleeps.
 */
export class CircuitBreaker {
  readonly #threshold: number;
  readonly #cooldownMs: number;
  readonly #now: () => number;
  #failures = 0;
  #openUntil = 0;
  #state: BreakerState = 'closed';
  #trialInFlight = false;

  constructor(options: { failureThreshold: number; cooldownMs: number; now?: () => number }) {
    this.#threshold = options.failureThreshold;
    this.#cooldownMs = options.cooldownMs;
    this.#now = options.now ?? Date.now;
  }

  get state(): BreakerState {
    if (this.#state === 'open' && this.#now() >= this.#openUntil) return 'half_open';
    return this.#state;
  }

  /** May a request go out now? In half-open state only one does, until it reports back. */
  tryAcquire(): boolean {
    const state = this.state;
    if (state === 'closed') return true;
    if (state === 'open') return false;
    if (this.#trialInFlight) return false;
    this.#state = 'half_open';
    this.#trialInFlight = true;
    return true;
  }

  onSuccess(): void {
    this.#failures = 0;
    this.#trialInFlight = false;
    this.#state = 'closed';
  }

  onFailure(): void {
    this.#failures += 1;
    const wasTrial = this.#trialInFlight;
    this.#trialInFlight = false;
    if (wasTrial || this.#failures >= this.#threshold) {
      this.#state = 'open';
      this.#openUntil = this.#now() + this.#cooldownMs;
    }
  }
}
