import type { Admin, Kafka } from '#plumbing/kafka/types.ts';
import type { TopicNames } from '#plumbing/kafka/topics.ts';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { DlqEntry } from '../dlq-records.ts';

/** What the DLQ operations use: connected clients owned by the caller. */
export interface DlqClients {
  kafka: Kafka;
  admin: Admin;
  names: TopicNames;
  /** The workers' consumer group (a replayed record without an event id settles by its commits). */
  group: string;
  logger: Logger;
}

export interface ReplayOutcome {
  event_id: string | null;
  /** Where on the DLQ the replayed record came from. */
  from: string;
  /** Where the replay landed on the events topic, from the broker's answer (offset absent when not written). */
  partition?: number;
  offset?: string;
  status: string;
  ok: boolean;
  detail?: string;
}

/** A replayed record the broker acknowledged: what the wait settles. */
export interface SentRecord {
  entry: DlqEntry;
  /** The replayed-from header value: how a DLQ record of this replay is recognised. */
  marker: string;
  partition: number;
  offset: bigint;
}
