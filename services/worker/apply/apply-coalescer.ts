import type { ApplyResult, SourceRecord } from '#domain/apply/index.ts';

export interface ApplyCoalescerOptions {
  /** One transaction for the records given, results in the same order (SnapshotApplier.applyBatch). */
  applyBatch: (records: readonly SourceRecord[]) => Promise<ApplyResult[]>;
  /** At most this many records in one merged transaction; a larger part still goes alone. */
  maxRecords: number;
  /** At most this many transactions at once (default 1). */
  maxInFlight?: number;
  /** After each committed transaction: its records and how long it took. */
  onTransaction?: (records: number, seconds: number) => void;
}

interface Part {
  records: readonly SourceRecord[];
  resolve: (results: ApplyResult[]) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for the apply path. kafkajs hands the partitions of one fetch to concurrent
 * eachBatch calls and fetches again only when all of them have finished, so a fetch that brings
 * one record for each of eight partitions used to cost eight transactions in a row (and eight
 * relay passes after them). Here the chunks that are waiting share one transaction: while fewer
 * than maxInFlight transactions run, a chunk starts one at once (after the current turn of the
 * event loop, so that the other partitions of the same fetch join it); while all places are taken,
 * the chunks arriving queue up and all go together in the next one. Idle, a lone event waits for
 * nobody; under load, transactions grow by themselves. More than one in flight lets node prepare
 * a chunk while Postgres runs another, instead of the two taking turns.
 *
 * A merged transaction that fails is retried part by part, so one partition's bad record sends
 * only its own chunk down the one-record-at-a-time path (the batch handler's fallback).
 * Order: each part keeps its records in offset order, and a resource key lives in one partition,
 * so merging never reorders the events of a key.
 */
export class ApplyCoalescer {
  readonly #o: ApplyCoalescerOptions;
  readonly #maxInFlight: number;
  #queue: Part[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(options: ApplyCoalescerOptions) {
    this.#o = options;
    this.#maxInFlight = Math.max(1, options.maxInFlight ?? 1);
  }

  apply(records: readonly SourceRecord[]): Promise<ApplyResult[]> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ records, resolve, reject });
      if (this.#scheduled || this.#inFlight >= this.#maxInFlight) return;
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.#startWhatFits();
      });
    });
  }

  /** Starts transactions for the queued parts while fewer than maxInFlight run. */
  #startWhatFits(): void {
    while (this.#queue.length > 0 && this.#inFlight < this.#maxInFlight) {
      const parts = this.#take();
      this.#inFlight += 1;
      void this.#run(parts).finally(() => {
        this.#inFlight -= 1;
        this.#startWhatFits();
      });
    }
  }

  /** The oldest part, and the parts after it while the total stays within maxRecords. */
  #take(): Part[] {
    let records = this.#queue[0]!.records.length;
    let count = 1;
    while (count < this.#queue.length && records + this.#queue[count]!.records.length <= this.#o.maxRecords) {
      records += this.#queue[count]!.records.length;
      count += 1;
    }
    return this.#queue.splice(0, count);
  }

  async #run(parts: Part[]): Promise<void> {
    const records = parts.length === 1 ? parts[0]!.records : parts.flatMap((p) => p.records);
    let results: ApplyResult[];
    const started = performance.now();
    try {
      results = await this.#o.applyBatch(records);
    } catch (error) {
      if (parts.length === 1) {
        parts[0]!.reject(error);
        return;
      }
      for (const part of parts) await this.#run([part]);
      return;
    }
    const seconds = (performance.now() - started) / 1000;
    let at = 0;
    for (const part of parts) {
      part.resolve(results.slice(at, at + part.records.length));
      at += part.records.length;
    }
    // After the parts are settled: an observer that throws must not leave a chunk waiting forever.
    try {
      this.#o.onTransaction?.(records.length, seconds);
    } catch {
      // A metric is not worth a stuck partition.
    }
  }
}
