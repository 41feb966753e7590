import { describe, expect, it } from 'vitest';
import {
  allowedHostNames,
  checkOrigin,
  hostNameOf,
  isRefusal,
  OperatorGuard,
  safeNextPath,
  sessionIdFrom,
  SESSION_COOKIE,
  SignInThrottle,
  tokensEqual,
} from './guard.ts';

const TOKEN = 'operator-token-0123456789';
const ORIGIN = 'http://127.0.0.1:9470';

function signedIn(guard: OperatorGuard) {
  const s = guard.signIn('ada', TOKEN);
  if (isRefusal(s)) throw new Error(s.reason);
  return s;
}

describe('OperatorGuard', () => {
  it('disables every action when no token is configured', () => {
    const guard = new OperatorGuard(undefined);
    expect(guard.actionsEnabled).toBe(false);
    expect(guard.signIn('ada', '')).toMatchObject({ ok: false, status: 403 });
    expect(guard.authorize({ sessionId: 'x', csrf: 'y', origin: ORIGIN, expectedOrigin: ORIGIN })).toMatchObject({
      ok: false,
      status: 403,
    });
  });

  it('refuses a wrong token and a bad name', () => {
    const guard = new OperatorGuard(TOKEN);
    expect(guard.signIn('ada', 'wrong')).toMatchObject({ ok: false, status: 401 });
    expect(guard.signIn('<script>', TOKEN)).toMatchObject({ ok: false, status: 401 });
  });

  it('authorizes a session with its CSRF token from the same origin only', () => {
    const guard = new OperatorGuard(TOKEN);
    const s = signedIn(guard);
    const ok = guard.authorize({ sessionId: s.id, csrf: s.csrf, origin: ORIGIN, expectedOrigin: ORIGIN });
    expect(isRefusal(ok) ? ok.reason : ok.operator).toBe('ada');
    expect(guard.authorize({ sessionId: s.id, csrf: 'forged', origin: ORIGIN, expectedOrigin: ORIGIN })).toMatchObject({ status: 403 });
    expect(guard.authorize({ sessionId: s.id, csrf: undefined, origin: ORIGIN, expectedOrigin: ORIGIN })).toMatchObject({ status: 403 });
    expect(guard.authorize({ sessionId: s.id, csrf: s.csrf, origin: 'http://evil.example', expectedOrigin: ORIGIN })).toMatchObject({
      status: 403,
    });
    expect(guard.authorize({ sessionId: s.id, csrf: s.csrf, origin: undefined, expectedOrigin: ORIGIN })).toMatchObject({ status: 403 });
    expect(guard.authorize({ sessionId: 'other', csrf: s.csrf, origin: ORIGIN, expectedOrigin: ORIGIN })).toMatchObject({ status: 401 });
  });

  it('expires and signs out sessions', () => {
    let now = 0;
    const guard = new OperatorGuard(TOKEN, () => now);
    const s = signedIn(guard);
    expect(guard.session(s.id)).toBeDefined();
    now += 9 * 3600 * 1000;
    expect(guard.session(s.id)).toBeUndefined();
    const t = signedIn(guard);
    guard.signOut(t.id);
    expect(guard.session(t.id)).toBeUndefined();
  });

  it('reads the session cookie and compares tokens of any length', () => {
    expect(sessionIdFrom(`a=1; ${SESSION_COOKIE}=abc=; b=2`)).toBe('abc=');
    expect(sessionIdFrom(undefined)).toBeUndefined();
    expect(tokensEqual('a', 'a')).toBe(true);
    expect(tokensEqual('a', 'ab')).toBe(false);
    expect(checkOrigin('http://127.0.0.1:9470/dlq', ORIGIN)).toBeUndefined();
    expect(checkOrigin('not a url', ORIGIN)).toMatchObject({ status: 403 });
  });
});

describe('sessions and sign-in attempts do not pile up', () => {
  it('sweeps expired sessions', () => {
    let now = 0;
    const guard = new OperatorGuard(TOKEN, () => now);
    for (let i = 0; i < 3; i += 1) signedIn(guard);
    expect(guard.sessionCount).toBe(3);
    now += 8 * 60 * 60 * 1000 + 1;
    guard.sweep();
    expect(guard.sessionCount).toBe(0);
    signedIn(guard);
    now += 8 * 60 * 60 * 1000 + 1;
    // A sign-in sweeps too.
    signedIn(guard);
    expect(guard.sessionCount).toBe(1);
  });

  it('throttles an address after its failures and lets it try again once they age out', () => {
    let now = 1_000_000;
    const throttle = new SignInThrottle(3, 60_000, () => now, 2);
    for (let i = 0; i < 3; i += 1) {
      expect(throttle.retryAfterSeconds('a')).toBe(0);
      throttle.failed('a');
      now += 1000;
    }
    expect(throttle.retryAfterSeconds('a')).toBe(57);
    expect(throttle.retryAfterSeconds('b')).toBe(0);
    now += 57_000;
    expect(throttle.retryAfterSeconds('a')).toBe(0);
    // Bounded: the oldest address is forgotten first.
    throttle.failed('b');
    throttle.failed('c');
    throttle.failed('d');
    expect(throttle.trackedAddresses).toBe(2);
    now += 61_000;
    throttle.sweep();
    expect(throttle.trackedAddresses).toBe(0);
  });
});

describe('safeNextPath', () => {
  it.each([
    '//evil.example/x',
    '/\\evil.example',
    '\\\\evil.example',
    'https://evil.example/',
    'http:evil.example',
    '/\t/evil.example',
    '/\n/evil.example',
    '/.//evil.example',
    '/%2e//evil.example',
    '%2F%2Fevil.example',
    'javascript:alert(1)',
    '',
  ])('%j goes to /', (next) => {
    expect(safeNextPath(next)).toBe('/');
  });

  it('keeps a path of this console with its query', () => {
    expect(safeNextPath('/dlq?tenant=t1&reason=x')).toBe('/dlq?tenant=t1&reason=x');
    expect(safeNextPath('/%2F%2Fevil.example')).toBe('/%2F%2Fevil.example');
  });
});

describe('allowedHostNames / hostNameOf', () => {
  it('loopback names, the bound name and the configured ones; ports do not matter', () => {
    const names = allowedHostNames('0.0.0.0', ['Console.Example.com']);
    expect([...names].sort()).toEqual(['127.0.0.1', '::1', 'console.example.com', 'localhost']);
    expect(names.has(hostNameOf('console.example.com:9470')!)).toBe(true);
    expect(names.has(hostNameOf('[::1]:9470')!)).toBe(true);
    expect(names.has(hostNameOf('evil.example:9470')!)).toBe(false);
    expect(allowedHostNames('10.0.0.5', []).has('10.0.0.5')).toBe(true);
    expect(hostNameOf(undefined)).toBeUndefined();
    expect(hostNameOf('bad host')).toBeUndefined();
  });
});
