import { describe, expect, it } from 'vitest';
import { checkOrigin, isRefusal, OperatorGuard, sessionIdFrom, SESSION_COOKIE, tokensEqual } from './guard.ts';

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
