import { readFileSync } from 'node:fs';
// What bench/e2e watches besides the HTTP answers: (1) the applied topic, read by its own consumer
// (read_committed, the relay being transactional), and (2) the worker's commits, seen by polling
// applied_outbox for rows that became visible. Times are wall-clock ms of this process (wallNow).
import type { Kafka } from '#plumbing/kafka/types.ts';
import pg from 'pg';
import { APPLIED_HEADER_EVENT_ID } from '#domain/apply/index.ts';
import { wallNow } from './load.ts';

export interface AppliedSeen {
  /** When the bench's consumer got the record (its eachBatch call), wall ms. */
  received: number;
  /** The record's Kafka timestamp (CreateTime: the relay producer's send() time), ms. */
  kafkaTimestamp: number;
  partition: number;
}

export interface AppliedWatch {
  seen: Map<string, AppliedSeen>;
  /** Records whose event id had been seen already (a relay republish). */
  duplicates: number;
  /** Records without an event-id header. */
  unlabelled: number;
  stop(): Promise<void>;
}

/** Consumes the applied topic from the beginning in a fresh group; resolves once the group is joined. */
export async function watchApplied(kafka: Kafka, topic: string, groupId: string): Promise<AppliedWatch> {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, readUncommitted: false });
  const watch: AppliedWatch = {
    seen: new Map(),
    duplicates: 0,
    unlabelled: 0,
    stop: async () => {
      await consumer.disconnect();
    },
  };
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
  await consumer.run({
    // A fresh group each run that never resumes: committing offsets would only add a request per
    // fetch to the broker this bench measures.
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      const received = wallNow();
      for (const m of batch.messages) {
        const header = m.headers?.[APPLIED_HEADER_EVENT_ID];
        const eventId = header === undefined ? undefined : Array.isArray(header) ? String(header[0]) : String(header);
        if (eventId === undefined) {
          watch.unlabelled += 1;
          continue;
        }
        if (watch.seen.has(eventId)) {
          watch.duplicates += 1;
          continue;
        }
        watch.seen.set(eventId, { received, kafkaTimestamp: Number(m.timestamp), partition: batch.partition });
      }
    },
  });
  await joined;
  return watch;
}

export interface CommitSeen {
  /** When the commit was seen: the worker's log line written right after it (commitsFromWorkerLog), or the start
   * of the first poll whose snapshot saw the row (watchCommits: at most one poll interval + query time after it). */
  observed: number;
  /** applied_outbox.created_at: now() of the apply transaction, i.e. its start (Postgres's clock, same machine), ms. */
  transactionStart: number;
}

export interface CommitWatch {
  seen: Map<string, CommitSeen>;
  polls: number;
  /** Slowest poll (query round trip), ms. */
  slowestPollMs: number;
  stop(): Promise<void>;
}

// Rows from transactions that committed since the previous poll all have tx >= the previous poll's
// snapshot xmin (a transaction invisible to a snapshot is either running at it, xid >= xmin, or
// starts later), so that bound loses none; the id floor (every id up to it already seen) keeps each
// poll small even if some other transaction on the cluster holds xmin back. Both in one statement,
// so both use one snapshot.
const POLL_SQL = `
  SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
         ARRAY(SELECT event_id FROM applied_outbox WHERE tx >= $1::xid8 AND id > $2 ORDER BY id) AS event_ids,
         ARRAY(SELECT id FROM applied_outbox WHERE tx >= $1::xid8 AND id > $2 ORDER BY id) AS ids,
         ARRAY(SELECT (extract(epoch FROM created_at) * 1000)::float8 FROM applied_outbox WHERE tx >= $1::xid8 AND id > $2 ORDER BY id) AS created`;

/** Polls the worker's database every `pollMs` for newly visible applied_outbox rows. */
export async function watchCommits(databaseUrl: string, pollMs: number): Promise<CommitWatch> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-e2e-commit-watch' });
  await client.connect();
  const seenIds = new Set<number>();
  let xmin = '0';
  let floor = 0;
  let running = true;
  const watch: CommitWatch = {
    seen: new Map(),
    polls: 0,
    slowestPollMs: 0,
    stop: async () => {
      running = false;
      await loop;
      await client.end();
    },
  };
  const loop = (async () => {
    while (running) {
      const started = wallNow();
      const { rows } = await client.query<{ xmin: string; event_ids: string[]; ids: string[]; created: number[] }>(POLL_SQL, [xmin, floor]);
      const row = rows[0]!;
      for (let i = 0; i < row.ids.length; i += 1) {
        const id = Number(row.ids[i]);
        if (seenIds.has(id)) continue;
        seenIds.add(id);
        const eventId = row.event_ids[i]!;
        if (!watch.seen.has(eventId)) watch.seen.set(eventId, { observed: started, transactionStart: row.created[i]! });
      }
      while (seenIds.has(floor + 1)) seenIds.delete(++floor);
      xmin = row.xmin;
      watch.polls += 1;
      const took = wallNow() - started;
      watch.slowestPollMs = Math.max(watch.slowestPollMs, took);
      if (pollMs - took >= 1) await new Promise((r) => setTimeout(r, pollMs - took));
    }
  })();
  return watch;
}

/**
 * The commits, read after the run rather than polled during it, so that measuring them puts no
 * load on the Postgres being measured (a 5 ms poller cost it ~15% of a core): the worker's
 * per-event line (`event processed`, logged right after its transaction's COMMIT returned, pino's
 * millisecond `time`) and, in one query, applied_outbox.created_at (the transaction's start).
 */
export async function commitsFromWorkerLog(logFile: string, databaseUrl: string): Promise<CommitWatch> {
  const logged = new Map<string, number>();
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.includes('"event processed"')) continue;
    const entry = JSON.parse(line) as { time: string | number; event_id?: string; outcome?: string };
    if (entry.outcome !== 'applied' || entry.event_id === undefined || logged.has(entry.event_id)) continue;
    logged.set(entry.event_id, typeof entry.time === 'number' ? entry.time : Date.parse(entry.time));
  }
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-e2e-commits' });
  await client.connect();
  const { rows } = await client.query<{ event_id: string; created: number }>(
    'SELECT event_id, (extract(epoch FROM created_at) * 1000)::float8 AS created FROM applied_outbox',
  );
  await client.end();
  const seen = new Map<string, CommitSeen>();
  for (const r of rows) {
    const observed = logged.get(r.event_id);
    if (observed !== undefined) seen.set(r.event_id, { observed, transactionStart: r.created });
  }
  return { seen, polls: 0, slowestPollMs: 0, stop: async () => {} };
}
