import { describe, expect, it } from 'vitest';
import { clientKey } from './http-input.ts';

describe('the client key a share of the body budget is kept under', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:aaaa::1', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    [undefined, 'unknown'],
  ])('%s -> %s', (address, key) => {
    expect(clientKey(address)).toBe(key);
  });
});
