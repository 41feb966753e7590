import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

// patches/kafkajs+2.2.4.patch has kafkajs checksum record batches with @node-rs/crc32's native
// CRC-32C instead of its table-driven JavaScript. A wrong checksum would make the broker refuse
// every batch (CORRUPT_MESSAGE); this holds the module kafkajs uses to the JavaScript it replaced
// and to the standard check value.
const require = createRequire(import.meta.url);
const crc32c = require('kafkajs/src/protocol/recordBatch/crc32C') as (buffer: Buffer) => number;
const tableDriven = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C') as (buffer: Buffer) => number;
const unsigned = (value: number) => value >>> 0;

describe("kafkajs's CRC-32C", () => {
  it('is the native implementation where it installed', () => {
    expect(() => require('@node-rs/crc32')).not.toThrow();
    expect(crc32c.toString()).toContain('native');
  });

  it('gives the standard check value (CRC-32C of "123456789" is 0xE3069283)', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc32c(Buffer.alloc(0))).toBe(0);
  });

  it('equals the table-driven JavaScript on any bytes, as an unsigned 32-bit value', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), (bytes) => {
        const buffer = Buffer.from(bytes);
        expect(crc32c(buffer)).toBe(unsigned(tableDriven(buffer)));
      }),
      { numRuns: 500, seed: 32 },
    );
  });
});
