// Signing in and out: GET and POST /sign-in, POST /sign-out. A session is what actions (and, where
// configured, reading) need; failed sign-ins are throttled per client (an IPv4 address, an IPv6 /64).
import { Router } from 'express';
import { isRefusal, safeNextPath, SESSION_COOKIE, type SignInThrottle } from '../guard.ts';
import { signInPage } from '../pages/search.ts';
import { text, type RouteContext } from './context.ts';

export function signInRoutes(
  { config, logger, guard, ctxOf, send, authorize, originOf, ownOrigin }: RouteContext,
  throttle: SignInThrottle,
): Router {
  const router = Router();
  router.get('/sign-in', (req, res) => send(res, signInPage(ctxOf(req), undefined, text(req.query.next) ?? '/')));

  router.post('/sign-in', (req, res) => {
    const body = req.body as Record<string, unknown>;
    const address = req.socket.remoteAddress ?? '';
    const wait = throttle.retryAfterSeconds(address);
    if (wait > 0) {
      logger.warn({ action: 'sign-in', operator: text(body.operator), address, refused: 'throttled' }, 'console sign-in refused');
      res.set('retry-after', String(wait));
      return send(res, signInPage(ctxOf(req), `Too many failed sign-ins from your address or network: try again in ${wait} s.`), 429);
    }
    // A sign-in from another site would plant its own session (login CSRF): same origin only.
    const origin_ = guard.actionsEnabled ? checkSameOrigin(originOf(req), ownOrigin(req)) : undefined;
    if (origin_) return send(res, signInPage(ctxOf(req), origin_), 403);
    const result = guard.signIn(text(body.operator) ?? '', text(body.token) ?? '');
    if (isRefusal(result)) {
      if (result.status === 401) throttle.failed(address);
      logger.warn({ action: 'sign-in', operator: text(body.operator), address, refused: result.reason }, 'console sign-in refused');
      return send(res, signInPage(ctxOf(req), result.reason), result.status);
    }
    logger.info({ action: 'sign-in', operator: result.operator }, 'operator signed in');
    res.cookie(SESSION_COOKIE, result.id, {
      httpOnly: true,
      sameSite: 'strict',
      path: '/',
      maxAge: 8 * 3600 * 1000,
      secure: config.https ?? false,
    });
    // Only a path on this console: never an open redirect.
    res.redirect(303, safeNextPath(text(body.next)));
  });

  router.post('/sign-out', (req, res) => {
    const session = authorize(req);
    if (!isRefusal(session)) {
      guard.signOut(session.id);
      logger.info({ action: 'sign-out', operator: session.operator }, 'operator signed out');
    }
    res.clearCookie(SESSION_COOKIE, { path: '/', secure: config.https ?? false });
    res.redirect(303, '/');
  });
  return router;
}

function checkSameOrigin(given: string | undefined, origin: string): string | undefined {
  if (!given) return 'no Origin header: refused';
  try {
    return new URL(given).origin === origin ? undefined : 'request not from this console: refused';
  } catch {
    return 'unreadable Origin header: refused';
  }
}
