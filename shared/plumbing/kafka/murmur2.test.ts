import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Partitioners, type PartitionerArgs } from 'kafkajs';
import { murmur2, partitionForKey } from './murmur2.ts';

const require = createRequire(import.meta.url);
const kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2') as (key: Buffer | string) => number;

describe('murmur2', () => {
  it('equals kafkajs (and so Java) on any key: ASCII, UTF-8, every length mod 4', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 80 }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.uint8Array({ maxLength: 64 })),
        (key) => {
          const input = typeof key === 'string' ? key : Buffer.from(key);
          expect(murmur2(input)).toBe(kafkajsMurmur2(input));
        },
      ),
      { seed: 1303, numRuns: 5000 },
    );
    // Known value from Kafka's own tests (Utils.murmur2 of "21").
    expect(murmur2(Buffer.from('21'))).toBe(-973932308);
  });

  it('gives the partition kafkajs DefaultPartitioner gives', () => {
    const partitioner = Partitioners.DefaultPartitioner();
    for (const count of [1, 3, 12, 50]) {
      const partitionMetadata = Array.from({ length: count }, (_, partitionId) => ({
        partitionId,
        leader: 0,
      })) as PartitionerArgs['partitionMetadata'];
      for (let i = 0; i < 500; i += 1) {
        const key = `tenant${i % 7}/theme/theme_${i}`;
        expect(partitionForKey(key, count)).toBe(partitioner({ topic: 't', partitionMetadata, message: { key, value: null } }));
      }
    }
  });
});
