// Who may act, and proof that a request to act came from the console's own page.
// Reading is open. An action (replay, reconcile) needs a signed-in operator: the sign-in form takes
// a name and CONSOLE_OPERATOR_TOKEN, and opens a session (an HttpOnly, SameSite=Strict cookie).
// Each session has a CSRF token of its own, put in every action form and checked against the
// session (synchroniser token); the Origin (or Referer) of a POST must be the console itself.
// Sessions live in memory: a restart signs everyone out, which is fine for an operator tool.
import { randomBytes, timingSafeEqual, createHash } from 'node:crypto';

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

  signIn(operator: string, token: string): Session | GuardRefusal {
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
