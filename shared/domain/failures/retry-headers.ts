import { headerText, type RecordHeaders } from '#plumbing/kafka/headers.ts';

/** One header per fact, readable with any Kafka tool (kcat -f '%h'), instead of one packed JSON header. */
export const RETRY_HEADERS = {
  /** Attempts made so far, all failed: 1 on retry.1 ... 4 on retry.4, 5 on the DLQ after the chain. */
  attempt: 'retry-attempt',
  firstFailureAt: 'retry-first-failure-at',
  lastErrorCode: 'retry-last-error-code',
  lastErrorMessage: 'retry-last-error-message',
  originalTopic: 'retry-original-topic',
  originalPartition: 'retry-original-partition',
  originalOffset: 'retry-original-offset',
  /** Not to be applied before this instant (ISO-8601). */
  notBefore: 'retry-not-before',
} as const;

export const DLQ_HEADERS = {
  /** Why the record is here: a failure code (invalid_envelope, quarantined...) or retries_exhausted. */
  reason: 'dlq-reason',
  deadLetteredAt: 'dlq-dead-lettered-at',
  /** The topic the record was consumed from when it was dead-lettered (events or a retry topic). */
  failedTopic: 'dlq-failed-topic',
} as const;

export const FAILURE_HEADER_PREFIXES = ['retry-', 'dlq-'] as const;

export const MAX_ERROR_MESSAGE_BYTES = 512;

export interface RetryInfo {
  attempt: number;
  firstFailureAt: Date;
  lastErrorCode: string;
  lastErrorMessage: string;
  originalTopic: string;
  originalPartition: number;
  originalOffset: string;
  notBefore: Date;
}

export interface DeadLetterInfo extends Omit<RetryInfo, 'notBefore'> {
  reason: string;
  deadLetteredAt: Date;
  failedTopic: string;
}

/** Cuts at a UTF-8 character boundary so the header stays valid text. */
export function truncateUtf8(text: string, maxBytes = MAX_ERROR_MESSAGE_BYTES): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  const marker = '…';
  let end = maxBytes - Buffer.byteLength(marker);
  // Step back over continuation bytes (10xxxxxx) to a character start.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end -= 1;
  return bytes.subarray(0, end).toString('utf8') + marker;
}

export function encodeRetryInfo(info: RetryInfo): Record<string, string> {
  return {
    [RETRY_HEADERS.attempt]: String(info.attempt),
    [RETRY_HEADERS.firstFailureAt]: info.firstFailureAt.toISOString(),
    [RETRY_HEADERS.lastErrorCode]: info.lastErrorCode,
    [RETRY_HEADERS.lastErrorMessage]: truncateUtf8(info.lastErrorMessage),
    [RETRY_HEADERS.originalTopic]: info.originalTopic,
    [RETRY_HEADERS.originalPartition]: String(info.originalPartition),
    [RETRY_HEADERS.originalOffset]: info.originalOffset,
    [RETRY_HEADERS.notBefore]: info.notBefore.toISOString(),
  };
}

export function encodeDeadLetterInfo(info: DeadLetterInfo): Record<string, string> {
  const headers = encodeRetryInfo({ ...info, notBefore: info.deadLetteredAt });
  // A DLQ record waits for an operator, not a timer.
  delete headers[RETRY_HEADERS.notBefore];
  return {
    ...headers,
    [DLQ_HEADERS.reason]: info.reason,
    [DLQ_HEADERS.deadLetteredAt]: info.deadLetteredAt.toISOString(),
    [DLQ_HEADERS.failedTopic]: info.failedTopic,
  };
}

export type DecodeResult<T> = { ok: true; info: T } | { ok: false; missing: boolean; problem: string };

/** Reads the retry headers of a record from a retry topic; missing: true when it has none at all. */
export function decodeRetryInfo(headers: RecordHeaders | undefined): DecodeResult<RetryInfo> {
  const attemptText = headerText(headers, RETRY_HEADERS.attempt);
  if (attemptText === undefined) return { ok: false, missing: true, problem: `no ${RETRY_HEADERS.attempt} header` };
  const problems: string[] = [];
  const attempt = Number(attemptText);
  if (!Number.isInteger(attempt) || attempt < 1) problems.push(`${RETRY_HEADERS.attempt} "${attemptText}"`);
  const date = (name: string): Date => {
    const text = headerText(headers, name);
    const value = text === undefined ? Number.NaN : Date.parse(text);
    if (Number.isNaN(value)) problems.push(`${name} "${text ?? ''}"`);
    return new Date(Number.isNaN(value) ? 0 : value);
  };
  const text = (name: string, required: boolean): string => {
    const value = headerText(headers, name);
    if (value === undefined && required) problems.push(`${name} missing`);
    return value ?? '';
  };
  const firstFailureAt = date(RETRY_HEADERS.firstFailureAt);
  const notBefore = date(RETRY_HEADERS.notBefore);
  const originalTopic = text(RETRY_HEADERS.originalTopic, true);
  const partitionText = text(RETRY_HEADERS.originalPartition, true);
  const originalPartition = Number(partitionText);
  if (!Number.isInteger(originalPartition) || originalPartition < 0) problems.push(`${RETRY_HEADERS.originalPartition} "${partitionText}"`);
  const originalOffset = text(RETRY_HEADERS.originalOffset, true);
  if (!/^\d+$/.test(originalOffset)) problems.push(`${RETRY_HEADERS.originalOffset} "${originalOffset}"`);
  if (problems.length > 0) return { ok: false, missing: false, problem: `invalid retry headers: ${problems.join(', ')}` };
  return {
    ok: true,
    info: {
      attempt,
      firstFailureAt,
      lastErrorCode: text(RETRY_HEADERS.lastErrorCode, false),
      lastErrorMessage: text(RETRY_HEADERS.lastErrorMessage, false),
      originalTopic,
      originalPartition,
      originalOffset,
      notBefore,
    },
  };
}

/** Reads a DLQ record's headers (for the CLI's list / show / replay). */
export function decodeDeadLetterInfo(headers: RecordHeaders | undefined): DecodeResult<DeadLetterInfo> {
  const reason = headerText(headers, DLQ_HEADERS.reason);
  if (reason === undefined) return { ok: false, missing: true, problem: `no ${DLQ_HEADERS.reason} header` };
  const at = Date.parse(headerText(headers, DLQ_HEADERS.deadLetteredAt) ?? '');
  const withNotBefore = { ...headers, [RETRY_HEADERS.notBefore]: headerText(headers, DLQ_HEADERS.deadLetteredAt) ?? '' };
  const retry = decodeRetryInfo(withNotBefore);
  if (!retry.ok) return { ok: false, missing: false, problem: retry.problem };
  if (Number.isNaN(at)) return { ok: false, missing: false, problem: `${DLQ_HEADERS.deadLetteredAt} invalid` };
  const { notBefore: _unused, ...rest } = retry.info;
  return {
    ok: true,
    info: {
      ...rest,
      reason,
      deadLetteredAt: new Date(at),
      failedTopic: headerText(headers, DLQ_HEADERS.failedTopic) ?? rest.originalTopic,
    },
  };
}

/**
 * The record's own headers without any retry-/dlq- bookkeeping: what the ingress originally
 * produced. Re-producing the original key, body and these headers to the events topic is a replay.
 */
export function originalHeaders(headers: RecordHeaders | undefined): RecordHeaders {
  const kept: RecordHeaders = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    if (FAILURE_HEADER_PREFIXES.some((prefix) => name.startsWith(prefix))) continue;
    kept[name] = value;
  }
  return kept;
}
