import type { EventRecordHeaders } from '#domain/contract/event-headers.ts';

/**
 * A verified delivery whose envelope parsed: the record headers (encodeEventHeaders reads it as
 * is), and what the request line and metrics say about it. Not the parsed envelope: this waits for
 * the broker's ack, and a body of small objects parses into several times its size on the heap
 * (the raw bytes, which go to Kafka, are bounded by MAX_INFLIGHT_BODY_BYTES; their trees would not be).
 */
export interface MatchedEvent extends EventRecordHeaders {
  tenant: string;
  /** The record key: tenant/type/id, so every event of one resource lands on one partition, in order. */
  resource: string;
  /**
   * The event type as a metric label, set only once it is one the source may publish: label
   * values stay bounded by configuration, whatever a caller sends.
   */
  typeLabel: string | undefined;
}
