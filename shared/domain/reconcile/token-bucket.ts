/**
 * A token bucket: `burst` requests at once, then `perSecond` on average. A caller reserves a token
 * and waits until it is due, so waiting callers are served in order and the rate holds however
 * many ask at once.
 */
export class TokenBucket {
  readonly #perSecond: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #at: number;

  constructor(options: { perSecond: number; burst: number; now?: () => number }) {
    this.#perSecond = options.perSecond;
    this.#burst = options.burst;
    this.#now = options.now ?? Date.now;
    this.#tokens = options.burst;
    this.#at = this.#now();
  }

  /** Takes a token; returns how many milliseconds to wait before using it (0: now). */
  reserve(): number {
    const now = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#at) / 1000) * this.#perSecond);
    this.#at = now;
    this.#tokens -= 1;
    // Below zero the token is borrowed from the future: due when the bucket refills it.
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens / this.#perSecond) * 1000);
  }

  async acquire(): Promise<void> {
    const wait = this.reserve();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}
