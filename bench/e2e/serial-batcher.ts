// Coalesces concurrent calls into one job at a time, as the ingress's BatchingPublisher does for
// its sends (kafkajs has no linger): what arrives in one turn of the event loop goes out together,
// and what arrives while a job runs goes out in the next. The bench's floor uses it for the
// idempotent producer's sends and for the transactional re-produce (one transaction per fetch).

interface Waiting<T> {
  items: T[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class SerialBatcher<T> {
  readonly #run: (items: T[]) => Promise<void>;
  #queue: Array<Waiting<T>> = [];
  #running = false;
  #scheduled = false;

  constructor(run: (items: T[]) => Promise<void>) {
    this.#run = run;
  }

  /** Resolves once a job holding these items has finished; rejects with that job's error. */
  add(items: T[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ items, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#running || this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    if (this.#running || this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    this.#running = true;
    try {
      await this.#run(batch.flatMap((w) => w.items));
      for (const w of batch) w.resolve();
    } catch (error) {
      for (const w of batch) w.reject(error);
    } finally {
      this.#running = false;
    }
    // What queued up meanwhile goes out now, without waiting for another turn.
    if (this.#queue.length > 0) await this.#flush();
  }
}
