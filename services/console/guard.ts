// Who may act, and proof that a request to act came from the console's own page.
// Reading is open on loopback (elsewhere it needs a session too). An action (replay, reconcile) needs a signed-in operator: the sign-in form takes
// a name and CONSOLE_OPERATOR_TOKEN, and opens a session (an HttpOnly, SameSite=Strict cookie).
// Each session has a CSRF token of its own, put in every action form and checked against the
// session (synchroniser token); the Origin (or Referer) of a POST must be the console itself.
// Sessions live in memory: a restart signs everyone out, which is fine for an operator tool.
import { randomBytes, timingSafeEqual, createHash } from 'node:crypto';
import { throttleKeyOf } from './client-address.ts';

export const SESSION_COOKIE = 'bridge_console_session';
const SESSION_TTL_MS = 8 * 60 * 60 * 1000;

export interface Session {
  id: string;
  operator: string;
  csrf: string;
  expiresAt: number;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Constant-time: the comparison takes as long whatever the guess (both sides hashed to one length). */
export function tokensEqual(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

export type GuardRefusal = { ok: false; status: 403 | 401; reason: string };

export class OperatorGuard {
  private readonly sessions = new Map<string, Session>();
  constructor(
    private readonly token: string | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** Actions are off when no operator token is configured. */
  get actionsEnabled(): boolean {
    return this.token !== undefined && this.token !== '';
  }

  /** Sessions held now (expired ones are swept at each sign-in and by sweep()). */
  get sessionCount(): number {
    return this.sessions.size;
  }

  /** Drops every expired session: an abandoned session must not stay in memory for the process's life. */
  sweep(): void {
    const now = this.now();
    for (const [id, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(id);
  }

  signIn(operator: string, token: string): Session | GuardRefusal {
    this.sweep();
    if (!this.actionsEnabled) return { ok: false, status: 403, reason: 'actions are disabled: CONSOLE_OPERATOR_TOKEN is not set' };
    const name = operator.trim();
    if (!/^[\w .@-]{1,64}$/.test(name)) return { ok: false, status: 401, reason: 'give your name (letters, digits, . @ - _ and spaces)' };
    if (!tokensEqual(token, this.token!)) return { ok: false, status: 401, reason: 'wrong operator token' };
    const session: Session = {
      id: randomBytes(24).toString('base64url'),
      operator: name,
      csrf: randomBytes(24).toString('base64url'),
      expiresAt: this.now() + SESSION_TTL_MS,
    };
    this.sessions.set(session.id, session);
    return session;
  }

  signOut(sessionId: string | undefined): void {
    if (sessionId) this.sessions.delete(sessionId);
  }

  session(sessionId: string | undefined): Session | undefined {
    if (!sessionId) return undefined;
    const s = this.sessions.get(sessionId);
    if (!s) return undefined;
    if (s.expiresAt <= this.now()) {
      this.sessions.delete(sessionId);
      return undefined;
    }
    return s;
  }

  /** For an action: a live session, its CSRF token in the form, and a same-origin request. */
  authorize(input: {
    sessionId: string | undefined;
    csrf: unknown;
    origin: string | undefined;
    expectedOrigin: string;
  }): Session | GuardRefusal {
    if (!this.actionsEnabled) return { ok: false, status: 403, reason: 'actions are disabled: CONSOLE_OPERATOR_TOKEN is not set' };
    const originCheck = checkOrigin(input.origin, input.expectedOrigin);
    if (originCheck) return originCheck;
    const session = this.session(input.sessionId);
    if (!session) return { ok: false, status: 401, reason: 'sign in as an operator first' };
    if (typeof input.csrf !== 'string' || !tokensEqual(input.csrf, session.csrf)) {
      return { ok: false, status: 403, reason: 'the form is stale or not from this console (CSRF token mismatch); reload the page' };
    }
    return session;
  }
}

/**
 * Failed sign-ins per client (an IPv4 address, an IPv6 /64: throttleKeyOf): after `limit` failures
 * within `windowMs` that client is refused (429) until its oldest failure leaves the window, so
 * guessing the token from one client is slow. At most `maxAddresses` clients are tracked, and
 * nothing is ever evicted: an entry leaves only when its failures have left the window. Evicting
 * would let a flood of fresh addresses free the entry that throttles the flooder. While the table
 * is full, every client not in it shares one budget of `limit` failures, so a flood gets at most one
 * more budget, and clients already tracked keep their own.
 */
export class SignInThrottle {
  private readonly failures = new Map<string, number[]>();
  /** Failures of clients that found the table full: one budget they share. */
  private overflow: number[] = [];
  private lastFullSweep = -Infinity;
  constructor(
    private readonly limit = 5,
    private readonly windowMs = 5 * 60 * 1000,
    private readonly now: () => number = Date.now,
    private readonly maxAddresses = 10_000,
  ) {}

  private inWindow(times: number[]): number[] {
    const since = this.now() - this.windowMs;
    return times.filter((t) => t > since);
  }

  private recent(key: string): number[] {
    const kept = this.inWindow(this.failures.get(key) ?? []);
    if (kept.length === 0) this.failures.delete(key);
    else this.failures.set(key, kept);
    return kept;
  }

  /** No room for another client, after forgetting those whose failures have aged out (at most once a second). */
  private full(): boolean {
    if (this.failures.size < this.maxAddresses) return false;
    if (this.now() - this.lastFullSweep >= 1000) {
      this.lastFullSweep = this.now();
      this.sweep();
    }
    return this.failures.size >= this.maxAddresses;
  }

  /** The failures that count for this client: its own, or the shared budget when it has none and there is no room. */
  private budgetOf(key: string): { own: boolean; times: number[] } {
    const own = this.recent(key);
    if (own.length > 0 || !this.full()) return { own: true, times: own };
    this.overflow = this.inWindow(this.overflow);
    return { own: false, times: this.overflow };
  }

  /** Seconds to wait before this address may try again; 0 when it may try now. */
  retryAfterSeconds(address: string): number {
    const recent = this.budgetOf(throttleKeyOf(address)).times;
    if (recent.length < this.limit) return 0;
    return Math.max(1, Math.ceil((recent[recent.length - this.limit]! + this.windowMs - this.now()) / 1000));
  }

  failed(address: string): void {
    const key = throttleKeyOf(address);
    const budget = this.budgetOf(key);
    // Only the last `limit` failures decide a wait: memory per client stays bounded.
    const times = [...budget.times, this.now()].slice(-this.limit);
    if (budget.own) this.failures.set(key, times);
    else this.overflow = times;
  }

  /** Forgets clients with no failure left in the window. */
  sweep(): void {
    for (const key of [...this.failures.keys()]) this.recent(key);
    this.overflow = this.inWindow(this.overflow);
  }

  get trackedAddresses(): number {
    return this.failures.size;
  }
}

/** A browser sends Origin on every POST (Referer as a fallback); one from elsewhere is refused. */
export function checkOrigin(origin: string | undefined, expected: string): GuardRefusal | undefined {
  if (origin === undefined || origin === '') return { ok: false, status: 403, reason: 'no Origin header: refused' };
  let given: string;
  try {
    given = new URL(origin).origin;
  } catch {
    return { ok: false, status: 403, reason: 'unreadable Origin header: refused' };
  }
  return given === expected ? undefined : { ok: false, status: 403, reason: `request from ${given}, not from this console: refused` };
}

export function isRefusal(value: Session | GuardRefusal): value is GuardRefusal {
  return 'ok' in value && value.ok === false;
}

/** The session id from a Cookie header. */
export function sessionIdFrom(cookieHeader: string | undefined): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === SESSION_COOKIE) return rest.join('=');
  }
  return undefined;
}

/**
 * Where to go after signing in: a path on this console, never another site. A `next` that the URL
 * parser would resolve elsewhere (`//host`, `/\host`, `https:`, a tab or newline inside `//`) or to a
 * path starting with `//` (which a browser reads as another host) gives `/`.
 */
export function safeNextPath(next: string | undefined): string {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.includes('\\')) return '/';
  const base = 'http://console.invalid';
  let url: URL;
  try {
    url = new URL(next, base);
  } catch {
    return '/';
  }
  if (url.origin !== base || url.pathname.startsWith('//')) return '/';
  return `${url.pathname}${url.search}${url.hash}`;
}

/** The host name of a Host header (no port, lower case, IPv6 without brackets); undefined when unreadable. */
export function hostNameOf(hostHeader: string | undefined): string | undefined {
  if (!hostHeader) return undefined;
  try {
    const name = new URL(`http://${hostHeader}`).hostname.toLowerCase();
    return name.startsWith('[') ? name.slice(1, -1) : name;
  } catch {
    return undefined;
  }
}

/**
 * The Host names a request may carry. A page on another site can point a name of its own at this
 * console's address (DNS rebinding) and read it same-origin; its requests still carry that name as
 * Host, so only the names the console is known by are answered.
 */
export function allowedHostNames(bindHost: string, configured: readonly string[]): Set<string> {
  const names = new Set(['localhost', '127.0.0.1', '::1']);
  const bind = hostNameOf(bindHost.includes(':') && !bindHost.startsWith('[') ? `[${bindHost}]` : bindHost);
  if (bind && bind !== '0.0.0.0' && bind !== '::') names.add(bind);
  for (const h of configured) {
    const name = hostNameOf(h);
    if (name) names.add(name);
  }
  return names;
}
