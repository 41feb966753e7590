// The ingress's way of sending, without its broker bookkeeping (services/ingress/publisher.ts):
// concurrent callers' records are coalesced into one batch send at a time, taken at the end of
// the event loop's turn (linger 0), at most maxRecords or maxBytes a batch. Both clients are
// driven through it, so the bench compares them under the ingress's own request pattern, with
// one request in flight on the idempotent producer.

export interface CoalescedRecord {
  key: string;
  value: Buffer;
  headers: Record<string, string>;
}

export interface CoalescerOptions {
  send: (records: CoalescedRecord[]) => Promise<void>;
  maxRecords: number;
  maxBytes: number;
}

interface Pending {
  records: CoalescedRecord[];
  bytes: number;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** Records of this request already taken into an earlier batch. */
  sent: number;
  /** Batches carrying part of this request that have not been acked yet. */
  open: number;
  failed: boolean;
}

const RECORD_OVERHEAD_BYTES = 100;

export function recordBytes(record: CoalescedRecord): number {
  return record.value.length + record.key.length + RECORD_OVERHEAD_BYTES;
}

/**
 * A request of several records resolves once every one of them is acked; a request larger than a
 * batch spans batches, in order. One batch is in flight at a time; what queues meanwhile goes out
 * as soon as it is acked.
 */
export class SendCoalescer {
  readonly #o: CoalescerOptions;
  #queue: Pending[] = [];
  #inFlight = false;
  #scheduled = false;
  /** Batches sent and records per batch, for the report. */
  readonly batchSizes: number[] = [];

  constructor(options: CoalescerOptions) {
    if (options.maxRecords < 1) throw new Error('maxRecords must be at least 1');
    this.#o = options;
  }

  publish(records: CoalescedRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const bytes = records.reduce((sum, r) => sum + recordBytes(r), 0);
      this.#queue.push({ records, bytes, resolve, reject, sent: 0, open: 0, failed: false });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#inFlight || this.#scheduled || this.#queue.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  /** The next batch: whole or partial requests from the head of the queue, within the limits. */
  take(): { records: CoalescedRecord[]; parts: Pending[] } {
    const records: CoalescedRecord[] = [];
    const parts: Pending[] = [];
    let bytes = 0;
    while (this.#queue.length > 0 && records.length < this.#o.maxRecords) {
      const head = this.#queue[0]!;
      if (head.failed) {
        this.#queue.shift();
        continue;
      }
      let took = false;
      while (head.sent < head.records.length && records.length < this.#o.maxRecords) {
        const next = head.records[head.sent]!;
        const size = recordBytes(next);
        // A record bigger than a batch still goes, alone.
        if (records.length > 0 && bytes + size > this.#o.maxBytes) break;
        records.push(next);
        bytes += size;
        head.sent += 1;
        took = true;
      }
      if (took) {
        head.open += 1;
        parts.push(head);
      }
      if (head.sent < head.records.length) break;
      this.#queue.shift();
    }
    return { records, parts };
  }

  #flush(): void {
    if (this.#inFlight) return;
    const { records, parts } = this.take();
    if (records.length === 0) return;
    this.#inFlight = true;
    this.batchSizes.push(records.length);
    this.#o.send(records).then(
      () => this.#settle(parts),
      (error: unknown) => this.#settle(parts, error),
    );
  }

  #settle(parts: Pending[], error?: unknown): void {
    this.#inFlight = false;
    for (const p of parts) {
      p.open -= 1;
      if (error !== undefined && !p.failed) {
        p.failed = true;
        p.reject(error);
      } else if (!p.failed && p.open === 0 && p.sent === p.records.length) {
        p.resolve();
      }
    }
    if (this.#queue.length > 0) this.#flush();
  }
}
