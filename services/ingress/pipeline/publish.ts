import { encodeEventHeaders } from '#domain/contract/event-headers.ts';
import { PublishError, type PublishRecord } from '../publisher.ts';
import type { MatchedEvent } from './matched-event.ts';
import type { Rejection } from './rejections.ts';

/** What the pipeline needs of the publisher (BatchingPublisher; a fake in unit tests). */
export interface EventPublisher {
  /** Resolves once the broker acknowledged the record; rejects with a PublishError otherwise. */
  publish(record: PublishRecord): Promise<void>;
}

/**
 * Publishes to the events topic keyed by resource and waits for the ack; undefined once acked.
 * Anything but a PublishError is a bug and is thrown.
 */
export async function publish(publisher: EventPublisher, event: MatchedEvent, rawBody: Buffer): Promise<Rejection | undefined> {
  try {
    // The raw bytes go to Kafka unchanged: consumers verify the same body-sha256 the provider sent.
    await publisher.publish({ key: event.resource, value: rawBody, headers: encodeEventHeaders(event) });
  } catch (error) {
    if (error instanceof PublishError) return { kind: error.code, event };
    throw error;
  }
  return undefined;
}
