import { describe, expect, it } from 'vitest';
import { jsonFaultOf, revisionFromIfMatch, type ApiError } from './api.ts';
import { bearerTokenOf, tokenDigest } from './auth.ts';

describe('operator API request parsing', () => {
  it('reads a bearer token, and nothing else', () => {
    expect(bearerTokenOf('Bearer abc.DEF-123_~')).toBe('abc.DEF-123_~');
    expect(bearerTokenOf('bearer  tok ')).toBe('tok');
    for (const h of [undefined, '', 'Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', 'Bearer a b', 'Bearer t\u00e9'])
      expect(bearerTokenOf(h), String(h)).toBeUndefined();
  });

  it('stores a token as its SHA-256', () => {
    expect(tokenDigest('abc').toString('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('takes the revision from If-Match: 428 without one, 400 for anything but one quoted number', () => {
    expect(revisionFromIfMatch('"7"')).toBe(7);
    expect(revisionFromIfMatch(' "12" ')).toBe(12);
    const refused = (h: string | undefined) => {
      try {
        revisionFromIfMatch(h);
      } catch (error) {
        return (error as ApiError).status;
      }
      return undefined;
    };
    expect(refused(undefined)).toBe(428);
    expect(refused('')).toBe(428);
    for (const h of ['7', 'W/"7"', '*', '"7", "8"', '"x"']) expect(refused(h), h).toBe(400);
  });

  it('names the JSON fault without quoting the body (it may hold a secret)', () => {
    let message = '';
    try {
      JSON.parse('{"value":"whsec_do-not-echo-me"} }');
    } catch (error) {
      message = (error as Error).message;
    }
    const fault = jsonFaultOf(message);
    expect(fault).not.toContain('do-not-echo-me');
    expect(fault.length).toBeGreaterThan(5);
    expect(jsonFaultOf(`Unexpected token 'x', "{"value":"do-not-echo-me" x}" is not valid JSON`)).toBe("Unexpected token 'x'");
  });
});
