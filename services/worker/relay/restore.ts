// The relay after a dump and restore: its cursor names transaction ids of another cluster, and
// the rows must be renumbered before the (tx, id) order means anything again.
import type { Pool } from 'pg';
import { withTransaction } from '#plumbing/db/transaction.ts';
import { readClusterId, rebaselineOutbox, type RelayPosition } from '#domain/store/outbox.ts';
import type { Logger } from '#plumbing/logging/logger.ts';

export class CursorRestoreGuard {
  readonly #pool: Pool;
  readonly #logger: Logger;
  #cluster: string | null | undefined;

  constructor(options: { pool: Pool; logger: Logger }) {
    this.#pool = options.pool;
    this.#logger = options.logger;
  }

  /** This cluster's system identifier, read once; null where the role may not read it. */
  async clusterId(): Promise<string | null> {
    if (this.#cluster === undefined) {
      try {
        this.#cluster = await readClusterId(this.#pool);
      } catch (error) {
        this.#logger.warn(
          { err: error },
          'cannot read the cluster identity (pg_control_system); only the transaction id check guards the cursor',
        );
        this.#cluster = null;
      }
    }
    return this.#cluster;
  }

  /** The cursor lies beyond this cluster's transaction ids, or was recorded on another cluster. */
  static misplaced(position: RelayPosition, cluster: string | null): boolean {
    return position.ahead || (position.cluster_id !== null && cluster !== null && position.cluster_id !== cluster);
  }

  /**
   * The cursor was recorded on another cluster (the database was dumped and restored) or lies
   * beyond this cluster's transaction ids: rows written now could sort before it and never be
   * published, or rows the old cluster published could sort after it and be published again after
   * newer ones. Every row of the old cluster is renumbered (rebaselineOutbox) and the cursor set
   * below every new row; nothing published is lost track of, nothing unpublished is skipped.
   */
  async rebaseline(position: RelayPosition, cluster: string | null): Promise<void> {
    await withTransaction(this.#pool, async (client) => {
      const moved = await rebaselineOutbox(client, { cursor: position, cluster });
      this.#logger.warn(
        { cursor_tx: position.tx, cursor_id: position.id, cursor_cluster: position.cluster_id, cluster, rows_renumbered: moved },
        'outbox relay cursor re-baselined: it was recorded on another cluster or beyond its transaction ids (a dump and restore?)',
      );
    });
  }
}
