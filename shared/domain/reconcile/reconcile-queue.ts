export interface QueuedReconcile {
  /** Triggers for one key are coalesced while one is queued or running. */
  key: string;
  run: () => Promise<void>;
}

export type EnqueueResult = 'queued' | 'coalesced' | 'dropped' | 'closed';

/**
 * Reconciliations run off the apply path: the worker queues them after its transaction commits and
 * goes on with the partition. At most `concurrency` run at once and at most `limit` wait; one
 * resource is reconciled once however many events trigger it meanwhile (the pull fetches its
 * latest snapshot anyway). A full queue drops the trigger (counted): the next trigger for that
 * resource, or an operator, pulls it later.
 */
export class ReconcileQueue {
  readonly #concurrency: number;
  readonly #limit: number;
  readonly #onError: (error: unknown, key: string) => void;
  readonly #waiting: QueuedReconcile[] = [];
  readonly #keys = new Set<string>();
  readonly #running = new Set<Promise<void>>();
  #closed = false;

  constructor(options: { concurrency: number; limit: number; onError: (error: unknown, key: string) => void }) {
    this.#concurrency = options.concurrency;
    this.#limit = options.limit;
    this.#onError = options.onError;
  }

  get size(): { waiting: number; running: number } {
    return { waiting: this.#waiting.length, running: this.#running.size };
  }

  enqueue(job: QueuedReconcile): EnqueueResult {
    if (this.#closed) return 'closed';
    if (this.#keys.has(job.key)) return 'coalesced';
    if (this.#waiting.length >= this.#limit) return 'dropped';
    this.#keys.add(job.key);
    this.#waiting.push(job);
    this.#drain();
    return 'queued';
  }

  /** Resolves when nothing waits or runs (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#running.size > 0 || this.#waiting.length > 0) await Promise.race(this.#running);
  }

  /** Drops what waits and waits for what runs. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const job of this.#waiting.splice(0)) this.#keys.delete(job.key);
    await Promise.allSettled([...this.#running]);
  }

  #drain(): void {
    while (this.#running.size < this.#concurrency && this.#waiting.length > 0) {
      const job = this.#waiting.shift()!;
      const running: Promise<void> = job
        .run()
        .catch((error: unknown) => this.#onError(error, job.key))
        .finally(() => {
          this.#running.delete(running);
          this.#keys.delete(job.key);
          this.#drain();
        });
      this.#running.add(running);
    }
  }
}
