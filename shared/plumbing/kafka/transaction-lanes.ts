import type { Producer } from 'kafkajs';
import type { ErrorCode } from '#plumbing/errors/bridge-error.ts';

/** What a publisher needs from its producer: RecoveringProducer's surface. */
export interface ProducerUse {
  connect(): Promise<void>;
  use<T>(work: (producer: Producer) => Promise<T>, timeoutMs: number, code: ErrorCode, what: string): Promise<T>;
  close(): Promise<void>;
}

/**
 * A transactional publisher that is fenced on demand: the outbox relay fences before it reads the
 * rows it will send, never after (see OutboxRelay).
 */
export interface FencedProducerUse extends ProducerUse {
  /** Initialises every transactional id unless that was done since the last failure or refence(). */
  fence(timeoutMs: number, code: ErrorCode, what: string): Promise<void>;
  /** Discards every producer: the next fence() (or use()) initialises every id anew. */
  refence(reason: string): void;
}

/** One lane: a producer that is replaced after a failure (RecoveringProducer). */
export interface Lane extends ProducerUse {
  /** Discards the current producer: the next use creates and initialises a new one (`quiet`: no failure to log). */
  replace(error: unknown, what: string, quiet?: boolean): void;
}

/**
 * Initialises a producer's transactional id (kafkajs does so on its first transaction(), not in
 * connect()): InitProducerId bumps the id's epoch, and the coordinator ends whatever transaction
 * an earlier holder of the id left open (a commit already under way completes first).
 */
export async function initialiseTransactions(producer: Producer): Promise<void> {
  const transaction = await producer.transaction();
  await transaction.abort();
}

/**
 * Transactional producers taken in turn, one transaction at a time, so that a transaction does not
 * wait for the markers of the one just committed.
 *
 * A commit returns once the coordinator has logged it; it then writes the commit markers, and a
 * new transaction of the same transactional id is refused (CONCURRENT_TRANSACTIONS, retried after
 * after TRANSACTION_RETRY_INITIAL_MS, then twice that) until they are written. Back-to-back
 * transactions of one producer therefore run at most about one per first retry. The next lane has its own transactional id
 * and nothing pending, so it starts at once, while the previous lane's markers are written.
 *
 * Order holds: transactions never overlap (each lane's work starts after the previous one's commit
 * returned), so a later batch has later offsets on every partition, and read_committed consumers
 * see records in offset order.
 *
 * Fencing holds for every lane, as it does for one transactional producer: before the first send,
 * and after any failure, every lane is initialised anew (initialiseTransactions) before anything
 * is sent. A former relay's late commit on any of the ids can then neither land after this
 * relay's records nor reorder them. A failure retries on the same lane index, after that re-initialisation.
 */
export class TransactionLanes implements FencedProducerUse {
  readonly #lanes: readonly Lane[];
  readonly #initialise: (producer: Producer) => Promise<void>;
  #next = 0;
  /** Every lane initialised since the last failure (or since the start). */
  #fenced = false;

  constructor(lanes: readonly Lane[], initialise: (producer: Producer) => Promise<void> = initialiseTransactions) {
    if (lanes.length === 0) throw new Error('TransactionLanes needs at least one producer');
    this.#lanes = lanes;
    this.#initialise = initialise;
  }

  /** Connects every lane (start-up fails fast when the broker is unreachable). */
  async connect(): Promise<void> {
    await Promise.all(this.#lanes.map((lane) => lane.connect()));
  }

  async fence(timeoutMs: number, code: ErrorCode, what: string): Promise<void> {
    if (this.#fenced) return;
    try {
      // Every id, not only the next lane's: a former relay may have a commit in flight on any.
      await Promise.all(this.#lanes.map((lane) => lane.use(this.#initialise, timeoutMs, code, `${what} (initialising)`)));
      this.#fenced = true;
    } catch (error) {
      for (const lane of this.#lanes) lane.replace(error, what);
      throw error;
    }
  }

  refence(reason: string): void {
    this.#fenced = false;
    for (const lane of this.#lanes) lane.replace(new Error(reason), reason, true);
  }

  async use<T>(work: (producer: Producer) => Promise<T>, timeoutMs: number, code: ErrorCode, what: string): Promise<T> {
    await this.fence(timeoutMs, code, what);
    try {
      const result = await this.#lanes[this.#next]!.use(work, timeoutMs, code, what);
      this.#next = (this.#next + 1) % this.#lanes.length;
      return result;
    } catch (error) {
      // The failed lane has replaced its own producer; the others are replaced too, so that the
      // next use initialises every id again before it sends (a fenced lane tells of another relay).
      this.#fenced = false;
      for (const lane of this.#lanes) lane.replace(error, what);
      throw error;
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.#lanes.map((lane) => lane.close()));
  }
}
