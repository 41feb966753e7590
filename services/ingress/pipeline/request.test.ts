import { describe, expect, it } from 'vitest';
import { isJsonContentType, singleHeader } from './request.ts';

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
