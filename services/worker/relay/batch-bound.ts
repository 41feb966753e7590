// The relay's batch bound per partition of the applied topic. One produce request carries one
// record batch per partition, and the broker refuses a batch larger than its message.max.bytes
// (the whole transaction then fails, again and again). Rows of one apply transaction mostly come
// from one source partition and keep its partition number on the applied topic, so a relay batch
// is a few long runs of one partition each: the bound has to hold per partition, on the encoded
// records (headers included), not on the payloads of the whole batch.
import type { Message } from '#plumbing/kafka/types.ts';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';

/** Bytes of a length or count written as a varint, at most (a 32-bit varint takes 5). */
const VARINT = 5;

/**
 * An upper bound of a record's size in a v2 record batch: its length, attributes, timestamp and
 * offset deltas, key, value and headers, every varint counted at its widest.
 */
export function recordBytesAtMost(message: Pick<Message, 'key' | 'value' | 'headers'>): number {
  let bytes = 1 + 4 * VARINT + byteLength(message.key) + VARINT + byteLength(message.value) + VARINT;
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    // A header given several values is written once per value.
    for (const one of Array.isArray(value) ? value : [value]) bytes += 2 * VARINT + Buffer.byteLength(name) + byteLength(one);
  }
  return bytes;
}

function byteLength(value: Buffer | string | null | undefined): number {
  if (value === null || value === undefined) return 0;
  return typeof value === 'string' ? Buffer.byteLength(value) : value.length;
}

/**
 * How many of `messages` (in publish order) go in one batch: the longest prefix in which no
 * partition gets more than `maxBytesPerPartition` of records beyond its first one. A prefix, so the
 * cursor moves past exactly the rows published; a partition's first record always goes, so one
 * large record cannot stall the relay (the broker judges it alone).
 */
export function fittingPrefix(messages: readonly Message[], partitionCount: number, maxBytesPerPartition: number): number {
  const bytes = new Map<number, number>();
  for (let i = 0; i < messages.length; i += 1) {
    const message = messages[i]!;
    const partition = message.key === undefined || message.key === null ? 0 : partitionForKey(message.key, partitionCount);
    const before = bytes.get(partition);
    const after = (before ?? 0) + recordBytesAtMost(message);
    if (before !== undefined && after > maxBytesPerPartition) return i;
    bytes.set(partition, after);
  }
  return messages.length;
}
