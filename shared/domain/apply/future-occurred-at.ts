import { maxFutureSkewHeader, receivedAtHeader } from '#domain/contract/event-headers.ts';
import type { ReceivedEnvelope } from '#domain/contract/index.ts';
import {
  DEFAULT_MAX_FUTURE_SKEW_SECONDS,
  describeFutureOccurredAt,
  MAX_FUTURE_SKEW_LIMIT_SECONDS,
  occurredAtTooFarAhead,
} from '#domain/contract/occurred-at-bound.ts';
import { BridgeError } from '#plumbing/errors/bridge-error.ts';
import type { SourceRecord } from './types.ts';

export const OCCURRED_AT_IN_FUTURE = 'occurred_at_in_future';

/**
 * A permanent failure when the record's occurred_at leads the time the ingress received it by more
 * than the bound, else undefined. The ingress refuses such an event today; this catches one accepted
 * before it did, seen again through a DLQ replay or a reprocess, so it is dead-lettered instead of
 * freezing its resource. Every source is judged alike, pulled snapshots too (their received-at is the
 * pull's time).
 *
 * The bound is the one the ingress wrote on the record (`max-future-skew`), else the default: an
 * ingress writes none for the default, and a record from before the bound existed has none either.
 * Without `received-at` (written by hand or by an old tool) the broker's record timestamp stands in.
 */
export function futureOccurredAtFailure(record: SourceRecord, envelope: ReceivedEnvelope): BridgeError | undefined {
  const receivedAt = receivedAtHeader(record.headers) ?? recordTime(record);
  if (receivedAt === undefined) return undefined;
  const bound = Math.min(maxFutureSkewHeader(record.headers) ?? DEFAULT_MAX_FUTURE_SKEW_SECONDS, MAX_FUTURE_SKEW_LIMIT_SECONDS);
  const ahead = occurredAtTooFarAhead(envelope.occurred_at, receivedAt, bound);
  if (ahead === undefined) return undefined;
  return new BridgeError(OCCURRED_AT_IN_FUTURE, describeFutureOccurredAt(ahead, 'received-at'), { retryable: false });
}

function recordTime(record: SourceRecord): Date | undefined {
  if (record.timestamp === undefined || !/^\d+$/.test(record.timestamp)) return undefined;
  return new Date(Number(record.timestamp));
}
