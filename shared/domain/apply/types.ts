import type { EventAction, ReceivedEnvelope } from '#domain/contract/index.ts';
import type { BridgeError } from '#plumbing/errors/bridge-error.ts';

export type RecordHeaderValue = Buffer | string | (Buffer | string)[] | undefined;

/** One consumed record, independent of the Kafka client: what the apply path needs to know. */
export interface SourceRecord {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | string | null;
  value: Buffer | null;
  /** Broker or producer timestamp, milliseconds since the epoch as a string (as kafkajs gives it). */
  timestamp?: string;
  headers?: Record<string, RecordHeaderValue>;
}

/** `ordering_mismatch`: the event's ordering (version or occurred_at) is not its resource's; dead-lettered. */
export type ApplyOutcome = 'applied' | 'stale' | 'duplicate' | 'duplicate_version' | 'quarantined' | 'ordering_mismatch' | 'invalid';

export interface ApplyResult {
  record: SourceRecord;
  outcome: ApplyOutcome;
  bodySha256: string;
  eventId?: string;
  resourceKey?: string;
  /** The resource the event is about (every outcome but `invalid`). */
  resource?: { tenantId: string; type: string; id: string };
  version?: number;
  /** `<type>.created|updated|deleted`. */
  eventType?: string;
  action?: EventAction;
  /** The stored version the event was compared with (null: the resource was unknown, or has none). */
  storedVersion?: number | null;
  /** What ordered the event: its version, or (a source's choice) its occurred_at. */
  orderedBy?: 'version' | 'occurred_at';
  /** Applied with a version more than one above the stored version. */
  versionGap?: boolean;
  reason?: string;
  /** For `invalid`: the permanent parse failure (code = the contract's parse error code). */
  error?: BridgeError;
  /** The trace the apply span belongs to (only with tracing on), for the event's log line. */
  traceId?: string;
}

export interface ParsedEvent {
  record: SourceRecord;
  envelope: ReceivedEnvelope;
  bodySha256: string;
  /** The raw body exactly as consumed. */
  bytes: Buffer;
  /** The provider's attempt number: the X-Webhook-Retry header the ingress passed on, else the body's. */
  deliveryAttempt: number | undefined;
  resourceKey: string;
  action: EventAction;
  /** What orders it against the stored state (see eventOrdering). */
  orderedBy: 'version' | 'occurred_at';
  /** occurred_at in microseconds (occurredAtMicros); set when ordered by occurred_at. */
  occurredAtMicros?: bigint;
}
