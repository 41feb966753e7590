import type { IngressMetrics } from '../metrics.ts';
import type { MatchedEvent } from './matched-event.ts';
import { REJECTIONS, type Rejection, type RejectionAnswer, type RejectionKind } from './rejections.ts';

/** The HTTP answer to one webhook, and what its log line and metrics say about it. */
export interface Answer {
  status: number;
  body: string;
  /** The log line's `reason`: `accepted`, or the rejection's reason from REJECTIONS. */
  reason: string;
  retryAfter: boolean;
  /** The Retry-After value when this answer has its own (a source's rate limit); else the ingress's. */
  retryAfterSeconds?: number;
  closeConnection: boolean;
  /** Known once the envelope parsed. */
  event: MatchedEvent | undefined;
  bodySha256: string | undefined;
}

export type RejectionMetrics = Pick<IngressMetrics, 'signatureFailures' | 'overloadRefusals' | 'eventRefusals' | 'sourceLimited'>;

export function errorBody(error: string, message?: string): string {
  return JSON.stringify(message === undefined ? { error } : { error, message });
}

// The bodies that do not depend on the request, serialised once.
const STATIC_BODIES = Object.fromEntries(
  Object.entries(REJECTIONS).map(([kind, row]: [string, RejectionAnswer<never>]) => [
    kind,
    typeof row.message === 'function' ? undefined : errorBody(row.code, row.message),
  ]),
) as Partial<Record<RejectionKind, string>>;

export function rejectionAnswer(rejection: Rejection): Answer {
  const row = REJECTIONS[rejection.kind] as RejectionAnswer;
  const message = row.message;
  const event = 'event' in rejection ? rejection.event : undefined;
  return {
    status: row.status,
    body: typeof message === 'function' ? errorBody(row.code, message(rejection)) : STATIC_BODIES[rejection.kind]!,
    reason: row.reason,
    retryAfter: row.retryAfter === true,
    ...('retryAfterSeconds' in rejection ? { retryAfterSeconds: rejection.retryAfterSeconds } : {}),
    closeConnection: row.closeConnection === true || ('bodyUnbounded' in rejection && rejection.bodyUnbounded),
    event,
    bodySha256: event !== undefined ? event.bodySha256 : 'bodySha256' in rejection ? rejection.bodySha256 : undefined,
  };
}

export function acceptedAnswer(event: MatchedEvent): Answer {
  return {
    status: 202,
    body: JSON.stringify({ status: 'accepted', event_id: event.eventId }),
    reason: 'accepted',
    retryAfter: false,
    closeConnection: false,
    event,
    bodySha256: event.bodySha256,
  };
}

/** `closing`: the ingress is shutting down, so no answer keeps its connection. */
export function answerHeaders(answer: Answer, retryAfterSeconds: string, closing: boolean): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-store' };
  if (answer.retryAfter)
    headers['retry-after'] = answer.retryAfterSeconds === undefined ? retryAfterSeconds : String(answer.retryAfterSeconds);
  if (answer.closeConnection || closing) headers.connection = 'close';
  return headers;
}

/** The counters a rejection adds to, besides webhook_requests_total (which every answer adds to). */
export function countRejection(metrics: RejectionMetrics, rejection: Rejection, sourceLabel: string): void {
  const row: RejectionAnswer = REJECTIONS[rejection.kind] as RejectionAnswer;
  if (row.signatureFailure) metrics.signatureFailures.inc({ source: sourceLabel, reason: row.reason });
  if (row.overload) metrics.overloadRefusals.inc({ reason: row.reason });
  if (row.eventRefusal) metrics.eventRefusals.inc({ source: sourceLabel, reason: row.reason });
  if (rejection.kind === 'source_rate_limited') metrics.sourceLimited.inc({ source: sourceLabel, limit: rejection.limit });
}
