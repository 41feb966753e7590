// The relay in a process of its own (WORKER_ROLE=relay) learns of new outbox rows the way the
// inline relay does from its nudge, only across processes: each apply commit of a WORKER_ROLE=apply
// worker sends a NOTIFY, and the relay process LISTENs. A notification is only a wake-up call: the
// relay's poll (RELAY_POLL_MS) still finds every row when one is lost or the LISTEN connection is down.
import pg from 'pg';
import type { Pool } from 'pg';
import type { Logger } from '#plumbing/logging/logger.ts';

/** Postgres's notification channel for "rows were added to applied_outbox". */
export const OUTBOX_CHANNEL = 'bridge_applied_outbox';

/**
 * Coalesced NOTIFYs from an apply worker: at most one in flight, and a nudge during it sends one
 * more after it, so a burst of commits costs a few notifications, not one each.
 */
export class OutboxNotifier {
  readonly #pool: Pool;
  readonly #logger: Logger;
  #sending: Promise<void> | undefined;
  #again = false;
  #failing = false;

  constructor(pool: Pool, logger: Logger) {
    this.#pool = pool;
    this.#logger = logger;
  }

  nudge(): void {
    if (this.#sending) {
      this.#again = true;
      return;
    }
    this.#sending = this.#send().finally(() => {
      this.#sending = undefined;
      if (this.#again) {
        this.#again = false;
        this.nudge();
      }
    });
  }

  /** Resolves when no notification is in flight. */
  async settled(): Promise<void> {
    while (this.#sending) await this.#sending;
  }

  async #send(): Promise<void> {
    try {
      await this.#pool.query(`NOTIFY ${OUTBOX_CHANNEL}`);
      if (this.#failing) this.#logger.info('outbox notifications: sending again');
      this.#failing = false;
    } catch (error) {
      // The relay process still polls: a lost notification only delays a record by RELAY_POLL_MS.
      if (!this.#failing) this.#logger.warn({ err: error }, 'outbox notification failed; the relay process finds the rows by polling');
      this.#failing = true;
    }
  }
}

export interface OutboxListenerOptions {
  /** A LISTEN needs a connection of its own (a pooled one is handed to others between queries). */
  databaseUrl: string;
  logger: Logger;
  onNotify: () => void;
  /** How long to wait before listening again after the connection failed. */
  retryMs?: number;
}

/** The relay process's LISTEN connection, opened again after a failure until stop(). */
export class OutboxListener {
  readonly #o: OutboxListenerOptions;
  #client: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #stopped = false;
  #listening = false;
  #heard = 0;

  constructor(options: OutboxListenerOptions) {
    this.#o = options;
  }

  /** Notifications heard so far. */
  get heard(): number {
    return this.#heard;
  }

  /** Whether the LISTEN is in place (the relay still polls when it is not). */
  get listening(): boolean {
    return this.#listening;
  }

  /** Listens; a failure is logged and retried in the background, never thrown. */
  async start(): Promise<void> {
    await this.#listen();
  }

  async #listen(): Promise<void> {
    if (this.#stopped) return;
    const client = new pg.Client({ connectionString: this.#o.databaseUrl, application_name: 'bridge-relay-listen', keepAlive: true });
    this.#client = client;
    const lost = (error: unknown) => {
      if (this.#client !== client) return;
      this.#client = undefined;
      this.#listening = false;
      void client.end().catch(() => {});
      if (this.#stopped) return;
      this.#o.logger.warn({ err: error }, 'outbox LISTEN connection failed; the relay polls until it is back');
      this.#retry = setTimeout(() => void this.#listen(), this.#o.retryMs ?? 1000);
      this.#retry.unref();
    };
    client.on('error', lost);
    // A connection the server closed without an error event is lost all the same.
    client.on('end', () => lost(new Error('the LISTEN connection ended')));
    client.on('notification', (message) => {
      if (message.channel !== OUTBOX_CHANNEL) return;
      this.#heard += 1;
      this.#o.onNotify();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
      this.#listening = true;
      // Rows committed while the connection was down were heard by nobody.
      this.#o.onNotify();
    } catch (error) {
      lost(error);
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    this.#listening = false;
    await client?.end().catch(() => {});
  }
}
