import { describe, expect, it } from 'vitest';
import { booleanArray, integerArray, PackedBytes, textArray } from './pg-params.ts';

describe('array literals', () => {
  it('quotes every element and escapes only quotes and backslashes', () => {
    expect(textArray(['a', 'b c', 'x"y', 'back\\slash', '', null, undefined, '{,}', 'NULL'])).toBe(
      '{"a","b c","x\\"y","back\\\\slash","",NULL,NULL,"{,}","NULL"}',
    );
    expect(textArray([])).toBe('{}');
    expect(integerArray([1, '42', -1])).toBe('{1,42,-1}');
    expect(booleanArray([true, false])).toBe('{t,f}');
  });
});

describe('PackedBytes', () => {
  it('addresses each value by a 1-based offset and its byte length; null is length -1', () => {
    const packed = new PackedBytes();
    packed.add('ab');
    packed.add(null);
    packed.add(Buffer.from('é!'));
    packed.add('');
    const [bytes, offsets, lengths] = packed.params();
    expect(bytes.toString('utf8')).toBe('abé!');
    expect(offsets).toBe('{1,1,3,6}');
    expect(lengths).toBe('{2,-1,3,0}');
  });
});

