import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

// patches/kafkajs+2.2.4.patch rewrites kafkajs's record encoder (one buffer per record, varints
// written in place, headers inline) and its per-partition grouping. These tests hold both to the
// Kafka protocol, written out here independently, whether or not the patch is applied.
const require = createRequire(import.meta.url);
type Encoded = { buffer: Buffer };
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as (record: {
  offsetDelta: number;
  timestampDelta: number;
  key: Buffer | string | null;
  value: Buffer | string | null;
  headers?: Record<string, string | Buffer | Array<string | Buffer>>;
}) => Encoded;
const groupMessagesPerPartition = require('kafkajs/src/producer/groupMessagesPerPartition') as (args: {
  topic: string;
  partitionMetadata: unknown[];
  messages: Array<{ partition: number; value: string }>;
  partitioner: (args: { message: { partition: number } }) => number;
}) => Record<string, Array<{ partition: number; value: string }>>;

/** Unsigned LEB128 of a zigzag-encoded integer (the protocol's varint and varlong). */
function varint(value: bigint): number[] {
  let z = value >= 0n ? value << 1n : (-value << 1n) - 1n;
  const bytes: number[] = [];
  do {
    const low = Number(z & 0x7fn);
    z >>= 7n;
    bytes.push(z > 0n ? low | 0x80 : low);
  } while (z > 0n);
  return bytes;
}

const bytesOf = (v: Buffer | string) => (typeof v === 'string' ? Buffer.from(v, 'utf8') : v);
const withLength = (v: Buffer | string | null) => (v === null ? varint(-1n) : [...varint(BigInt(bytesOf(v).length)), ...bytesOf(v)]);

/** A record as the protocol defines it (Record => Length Attributes TimestampDelta OffsetDelta Key Value Headers). */
function reference(r: {
  offsetDelta: number;
  timestampDelta: number;
  key: Buffer | string | null;
  value: Buffer | string | null;
  headers: Array<[string, string | Buffer]>;
}): Buffer {
  const body = [
    0,
    ...varint(BigInt(r.timestampDelta)),
    ...varint(BigInt(r.offsetDelta)),
    ...withLength(r.key),
    ...withLength(r.value),
    ...varint(BigInt(r.headers.length)),
    ...r.headers.flatMap(([k, v]) => [...withLength(k), ...withLength(v)]),
  ];
  return Buffer.from([...varint(BigInt(body.length)), ...body]);
}

const bytesOrText = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 300 }),
  fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
);

describe('kafkajs record encoding (patched)', () => {
  it('encodes every record as the protocol defines it', () => {
    fc.assert(
      fc.property(
        fc.record({
          offsetDelta: fc.nat({ max: 100_000 }),
          // Timestamp deltas beyond 2^30 and 2^31 take the 64-bit path.
          timestampDelta: fc.oneof(
            fc.integer({ min: -1000, max: 1000 }),
            fc.integer({ min: 2 ** 29, max: 2 ** 34 }),
            fc.constantFrom(2 ** 30 - 1, 2 ** 30, -(2 ** 30), -(2 ** 30) - 1),
          ),
          key: fc.option(bytesOrText, { nil: null }),
          value: fc.option(bytesOrText, { nil: null }),
          headers: fc.uniqueArray(fc.tuple(fc.string({ minLength: 1, maxLength: 40 }), bytesOrText), {
            maxLength: 14,
            selector: ([k]) => k,
          }),
        }),
        (r) => {
          const headers = Object.fromEntries(r.headers);
          const encoded = Record({ ...r, headers }).buffer;
          // In the headers object's own key order (integer-like keys first, as JavaScript orders them).
          expect(encoded.toString('hex')).toBe(reference({ ...r, headers: Object.entries(headers) }).toString('hex'));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('encodes a header with several values as one header per value, in order', () => {
    const encoded = Record({
      offsetDelta: 3,
      timestampDelta: 0,
      key: 'k',
      value: 'v',
      headers: { a: ['1', '2'], b: Buffer.from([0, 255]) },
    }).buffer;
    const expected = reference({
      offsetDelta: 3,
      timestampDelta: 0,
      key: 'k',
      value: 'v',
      headers: [
        ['a', '1'],
        ['a', '2'],
        ['b', Buffer.from([0, 255])],
      ],
    });
    expect(encoded.toString('hex')).toBe(expected.toString('hex'));
  });

  it('groups messages per partition in their order', () => {
    const messages = Array.from({ length: 500 }, (_, i) => ({ partition: (i * 7) % 12, value: String(i) }));
    const grouped = groupMessagesPerPartition({
      topic: 't',
      partitionMetadata: [{}],
      messages,
      partitioner: ({ message }) => message.partition,
    });
    expect(Object.keys(grouped)).toEqual(Array.from({ length: 12 }, (_, p) => String(p)));
    for (let p = 0; p < 12; p += 1) expect(grouped[String(p)]).toEqual(messages.filter((m) => m.partition === p));
    expect(groupMessagesPerPartition({ topic: 't', partitionMetadata: [], messages, partitioner: () => 0 })).toEqual({});
  });
});
