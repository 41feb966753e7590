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
import { throttleKeyOf } from './client-address.ts';

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
    // Bounded: once the table is full, addresses not in it share one budget instead of evicting.
    throttle.failed('b');
    throttle.failed('c');
    throttle.failed('d');
    expect(throttle.trackedAddresses).toBe(2);
    now += 61_000;
    throttle.sweep();
    expect(throttle.trackedAddresses).toBe(0);
  });
});

describe('the sign-in throttle against many addresses', () => {
  it('keys IPv4 by address, IPv6 by its /64 and an IPv4-mapped IPv6 address as its IPv4', () => {
    expect(throttleKeyOf('10.1.2.3')).toBe('10.1.2.3');
    expect(throttleKeyOf('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(throttleKeyOf('::FFFF:0a01:0203')).toBe('10.1.2.3');
    expect(throttleKeyOf('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(throttleKeyOf('2001:0DB8:0001:0002:ffff:eeee:dddd:cccc')).toBe('2001:db8:1:2::/64');
    expect(throttleKeyOf('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(throttleKeyOf('::1')).toBe('0:0:0:0::/64');
    expect(throttleKeyOf('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(throttleKeyOf('2001:db8::10.0.0.1')).toBe('2001:db8:0:0::/64');
    // Not an address at all (a unix socket): one key of its own, as before.
    expect(throttleKeyOf('')).toBe('');
  });

  it('many addresses in one IPv6 /64 share one budget; another /64 has its own', () => {
    let now = 1_000_000;
    const throttle = new SignInThrottle(5, 60_000, () => now);
    for (let i = 1; i <= 5; i += 1) {
      const address = `2001:db8:aa:bb:${i.toString(16)}:${(i * 7919).toString(16)}::${i}`;
      expect(throttle.retryAfterSeconds(address), address).toBe(0);
      throttle.failed(address);
      now += 1000;
    }
    expect(throttle.retryAfterSeconds('2001:db8:aa:bb:dead:beef:1:2')).toBeGreaterThan(0);
    expect(throttle.retryAfterSeconds('2001:db8:aa:bc::1')).toBe(0);
    expect(throttle.trackedAddresses).toBe(1);
  });

  it('a flood of fresh addresses cannot evict a throttled address, nor one part way there', () => {
    let now = 1_000_000;
    const throttle = new SignInThrottle(3, 60_000, () => now, 100);
    for (let i = 0; i < 3; i += 1) throttle.failed('198.51.100.7');
    for (let i = 0; i < 2; i += 1) throttle.failed('198.51.100.8');
    expect(throttle.retryAfterSeconds('198.51.100.7')).toBeGreaterThan(0);
    // Each flood request is a failed sign-in from an address never seen before (and for IPv6, another /64).
    for (let i = 0; i < 5000; i += 1) {
      const address = i % 2 === 0 ? `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` : `2001:db8:${i.toString(16)}::1`;
      if (throttle.retryAfterSeconds(address) === 0) throttle.failed(address);
      now += 1;
    }
    expect(throttle.retryAfterSeconds('198.51.100.7'), 'the throttled address is still throttled').toBeGreaterThan(0);
    throttle.failed('198.51.100.8');
    expect(throttle.retryAfterSeconds('198.51.100.8'), 'the part-way address kept its count').toBeGreaterThan(0);
    // Memory stays bounded, and the flood itself got no more than one table and one shared budget of guesses.
    expect(throttle.trackedAddresses).toBeLessThanOrEqual(100);
    expect(throttle.retryAfterSeconds('203.0.113.1'), 'a new address while the table is full shares the spent budget').toBeGreaterThan(0);
    // Once the failures leave the window, the table empties and everyone may try again.
    now += 61_000;
    expect(throttle.retryAfterSeconds('198.51.100.7')).toBe(0);
    expect(throttle.retryAfterSeconds('203.0.113.1')).toBe(0);
    throttle.sweep();
    expect(throttle.trackedAddresses).toBe(0);
  });

  it('while the table is full, addresses already in it keep their own budget', () => {
    let now = 1_000_000;
    const throttle = new SignInThrottle(3, 60_000, () => now, 2);
    throttle.failed('192.0.2.1');
    throttle.failed('192.0.2.2');
    for (let i = 0; i < 3; i += 1) throttle.failed(`192.0.2.${10 + i}`);
    expect(throttle.retryAfterSeconds('192.0.2.99')).toBeGreaterThan(0);
    expect(throttle.retryAfterSeconds('192.0.2.1')).toBe(0);
    expect(throttle.retryAfterSeconds('192.0.2.2')).toBe(0);
    now += 1000;
    expect(throttle.trackedAddresses).toBe(2);
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
