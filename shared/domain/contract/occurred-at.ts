// occurred_at as an ordering key (sources that order a resource type by occurred_at): one exact
// number per instant, so JavaScript's decision and Postgres's guard compare the same values.
// Microseconds, because Postgres keeps no finer: digits past the sixth are ignored (two events
// apart by less than a microsecond are a tie), never rounded (Postgres rounds text it parses, so
// the stored value is written from this key, not from the provider's string).

const FRACTION = /\.(\d+)/;

/** Microseconds since the epoch of a valid envelope occurred_at (ISO-8601 with Z or an offset). */
export function occurredAtMicros(occurredAt: string): bigint {
  const ms = Date.parse(occurredAt);
  if (Number.isNaN(ms)) throw new RangeError(`not a time: ${occurredAt}`);
  const fraction = FRACTION.exec(occurredAt)?.[1] ?? '';
  // Date.parse kept the first three digits of the fraction; the next three are the microseconds.
  const micros = fraction.length > 3 ? Number(fraction.slice(3, 6).padEnd(3, '0')) : 0;
  return BigInt(ms) * 1000n + BigInt(micros);
}

/** The key back as an ISO-8601 UTC time with six fraction digits (what Postgres stores exactly). */
export function formatMicros(micros: bigint): string {
  let ms = micros / 1000n;
  let rest = micros % 1000n;
  if (rest < 0n) {
    ms -= 1n;
    rest += 1000n;
  }
  const iso = new Date(Number(ms)).toISOString();
  return `${iso.slice(0, -1)}${String(rest).padStart(3, '0')}Z`;
}
