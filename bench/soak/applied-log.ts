// The soak's reader of the applied topic: when each of the run's requests got its record, in a
// typed array indexed as the request log (bench/soak/steady-load.ts), so that what it keeps stays a
// few bytes per request whatever the length of the run (bench/e2e/observe.ts keeps a map entry per
// record, fine for bench:e2e's short phases).
import type { Kafka } from '#plumbing/kafka/types.ts';
import { APPLIED_HEADER_EVENT_ID } from '#domain/apply/index.ts';
import { wallNow } from '../e2e/load.ts';
import type { RequestLog } from './steady-load.ts';

export interface AppliedLog {
  /** When the bench's consumer got request i's record (its eachBatch call), wall ms; NaN: not yet. */
  readonly received: Float64Array;
  /** Records of this run's requests (each counted once). */
  readonly count: number;
  /** Records of a request whose record had been seen already (a relay republish). */
  readonly duplicates: number;
  /** Records without an event-id header, or of event ids this run did not send. */
  readonly foreign: number;
  /** The requests whose record arrived since the previous call, in arrival order. */
  take(): number[];
  stop(): Promise<void>;
}

/** Consumes the applied topic from the beginning in a fresh group; resolves once the group is joined. */
export async function watchAppliedLog(kafka: Kafka, topic: string, groupId: string, requests: RequestLog): Promise<AppliedLog> {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, readUncommitted: false });
  const received = new Float64Array(requests.total).fill(NaN);
  let fresh: number[] = [];
  const log = {
    received,
    count: 0,
    duplicates: 0,
    foreign: 0,
    take: () => {
      const out = fresh;
      fresh = [];
      return out;
    },
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
      const at = wallNow();
      for (const m of batch.messages) {
        const header = m.headers?.[APPLIED_HEADER_EVENT_ID];
        const eventId = header === undefined ? undefined : Array.isArray(header) ? String(header[0]) : String(header);
        const i = eventId === undefined ? undefined : requests.indexOf(eventId);
        if (i === undefined) log.foreign += 1;
        else if (!Number.isNaN(received[i]!)) log.duplicates += 1;
        else {
          received[i] = at;
          log.count += 1;
          fresh.push(i);
        }
      }
    },
  });
  await joined;
  return log;
}
