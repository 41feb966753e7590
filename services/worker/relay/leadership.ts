import pg from 'pg';
import type { Logger } from '#plumbing/logging/logger.ts';
import { releaseRelayLeaderLock, tryRelayLeaderLock } from '#domain/store/outbox.ts';
import { limitIdleSession, ping } from '#domain/store/session.ts';

export interface RelayLeadershipOptions {
  url: string;
  /** The advisory lock every relay of one database competes for. */
  lockKey: number;
  /**
   * The server ends the leader's session after this long without a statement (Postgres >= 14
   * idle_session_timeout). The leader sends a heartbeat every quarter of it, so only a frozen
   * process (SIGSTOP, a hung VM) loses the lock, and another worker takes over.
   */
  idleSessionTimeoutMs: number;
  /** How often a worker that is not the leader tries to become it. */
  retryMs: number;
  logger: Logger;
}

/**
 * Which worker's relay publishes: the holder of a session-level advisory lock on a connection of
 * its own. It stays leader across passes (and while a send is stuck), so leadership does not hop
 * between workers; the transactional producer's fencing, not the lock, guarantees that a former
 * leader's late send cannot land after the new leader's.
 */
export class RelayLeadership {
  readonly #o: RelayLeadershipOptions;
  #client: pg.Client | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #lost = false;
  #lastAttempt = 0;

  constructor(options: RelayLeadershipOptions) {
    this.#o = options;
  }

  get isLeader(): boolean {
    return this.#client !== undefined && !this.#lost;
  }

  /**
   * A round trip on the leader session: true while it is alive, and so still holds the lock (a
   * session-level advisory lock ends only with its session or an unlock). hold() trusts what the
   * client has reported so far, which after a freeze may not yet include that the server ended the
   * session; this asks the server.
   */
  async confirm(): Promise<boolean> {
    const client = this.#client;
    if (client === undefined || this.#lost) return false;
    try {
      await ping(client);
      return !this.#lost;
    } catch {
      this.#lost = true;
      return false;
    }
  }

  /** True while this relay holds the lock; otherwise tries to take it (at most every retryMs). */
  async hold(): Promise<boolean> {
    if (this.isLeader) return true;
    if (this.#client !== undefined) {
      this.#o.logger.warn('relay leadership lost (its database session ended)');
      await this.#drop();
    }
    const now = Date.now();
    if (now - this.#lastAttempt < this.#o.retryMs) return false;
    this.#lastAttempt = now;
    const client = new pg.Client({
      connectionString: this.#o.url,
      application_name: 'worker-relay-leader',
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      connectionTimeoutMillis: 5_000,
      statement_timeout: 5_000,
      query_timeout: 7_000,
    });
    client.on('error', () => {
      this.#lost = true;
    });
    client.on('end', () => {
      this.#lost = true;
    });
    try {
      await client.connect();
      await limitIdleSession(client, this.#o.idleSessionTimeoutMs).catch((error: unknown) => {
        this.#o.logger.warn({ err: error }, 'idle_session_timeout unavailable (Postgres < 14): a frozen leader keeps the relay lock');
      });
      if (!(await tryRelayLeaderLock(client, this.#o.lockKey))) {
        await client.end().catch(() => {});
        return false;
      }
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
    this.#client = client;
    this.#lost = false;
    this.#heartbeat = setInterval(
      () => {
        ping(client).catch(() => {
          this.#lost = true;
        });
      },
      Math.max(250, this.#o.idleSessionTimeoutMs / 4),
    );
    this.#heartbeat.unref();
    this.#o.logger.info('relay leadership acquired');
    return true;
  }

  async release(): Promise<void> {
    const client = this.#client;
    if (client !== undefined && !this.#lost) await releaseRelayLeaderLock(client, this.#o.lockKey).catch(() => {});
    await this.#drop();
  }

  async #drop(): Promise<void> {
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    const client = this.#client;
    this.#client = undefined;
    this.#lost = false;
    if (client !== undefined) await client.end().catch(() => {});
  }
}
