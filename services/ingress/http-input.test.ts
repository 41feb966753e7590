import { describe, expect, it } from 'vitest';
import { clientKey, isJsonContentType, singleHeader } from './http-input.ts';

const request = (headersDistinct: Record<string, string[]>) => headersDistinct;

describe('request header checks', () => {
  it.each([
    ['application/json', true],
    ['application/json; charset=utf-8', true],
    ['Application/JSON;charset="UTF-8"', true],
    ['application/json; charset=latin1', false],
    ['application/json; boundary=x', false],
    ['application/jsonp', false],
    ['text/json', false],
    ['text/plain', false],
    ['', false],
  ])('content type %j is JSON: %s', (value, expected) => {
    expect(isJsonContentType(request({ 'content-type': [value] }))).toBe(expected);
  });

  it('refuses a missing or repeated content type', () => {
    expect(isJsonContentType(request({}))).toBe(false);
    expect(isJsonContentType(request({ 'content-type': ['application/json', 'application/json'] }))).toBe(false);
  });

  it('tells a repeated header from a missing one', () => {
    expect(singleHeader(request({ 'x-webhook-id': ['a'] }), 'x-webhook-id')).toEqual({ ok: true, value: 'a' });
    expect(singleHeader(request({}), 'x-webhook-id')).toEqual({ ok: true, value: undefined });
    expect(singleHeader(request({ 'x-webhook-id': ['a', 'a'] }), 'x-webhook-id')).toEqual({ ok: false, value: undefined });
  });
});

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
