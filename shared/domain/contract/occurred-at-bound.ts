// How far ahead of the receiving clock an event's occurred_at may be. An honest provider dates an
// event at or before it sends it, so a time ahead of the receiver's clock is that provider's clock
// running ahead. Unbounded, one event dated decades ahead would make every later update of its
// resource stale for good on a type ordered by occurred_at, and would seed that order if a type
// switched to occurred_at later: every source and type is held to the bound.

/**
 * The default bound, in seconds: the signature timestamp's default tolerance. A provider clock that
 * far ahead already fails the timestamped schemes, so the default refuses nothing an honest clock
 * sends, and leaves room for clocks that disagree by seconds.
 */
export const DEFAULT_MAX_FUTURE_SKEW_SECONDS = 300;
/** The largest bound a source may set (a week): enough for a provider whose zone offset is wrong. */
export const MAX_FUTURE_SKEW_LIMIT_SECONDS = 7 * 24 * 3600;

/** An occurred_at further ahead of a reference time than the bound allows. */
export interface FutureOccurredAt {
  occurredAt: string;
  /** The time it is compared with: when the ingress received the event. */
  reference: Date;
  /** Whole seconds ahead, rounded up (so it always exceeds the bound it broke). */
  aheadSeconds: number;
  boundSeconds: number;
}

/**
 * The excess when `occurredAt` is more than `boundSeconds` ahead of `reference`, else undefined
 * (a time exactly at the bound passes). A time that does not parse is the contract's to refuse.
 */
export function occurredAtTooFarAhead(occurredAt: string, reference: Date, boundSeconds: number): FutureOccurredAt | undefined {
  const aheadMs = Date.parse(occurredAt) - reference.getTime();
  if (!(aheadMs > boundSeconds * 1000)) return undefined;
  return { occurredAt, reference, aheadSeconds: Math.ceil(aheadMs / 1000), boundSeconds };
}

/** One line a provider or an operator can act on: how far ahead, of which clock, and the bound. */
export function describeFutureOccurredAt(ahead: FutureOccurredAt, clock: string): string {
  return (
    `occurred_at ${ahead.occurredAt} is ${ahead.aheadSeconds} s ahead of ${clock} (${ahead.reference.toISOString()}); ` +
    `at most ${ahead.boundSeconds} s ahead is accepted`
  );
}
