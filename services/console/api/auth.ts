// Who calls the operator API: a named operator token (`Authorization: Bearer <token>`), looked up by
// its SHA-256 in bridge_operator_tokens, with a read or a write scope. Not the console's cookie: a
// script has no session, and a header a browser never sends by itself leaves no cross-site request
// to forge. Failed tokens count in the sign-in throttle, per client address.
import { tokenDigest } from '#domain/sources/operator-tokens.ts';
import type { NextFunction, Request, Response } from 'express';
import type pg from 'pg';
import type { Logger } from '#plumbing/logging/logger.ts';
import { useTokenRow } from '#domain/store/sources.ts';
import type { SignInThrottle } from '../guard.ts';

export type TokenScope = 'read' | 'write';

export interface ApiCaller {
  /** The token's name: the actor in the audit log. */
  name: string;
  scope: TokenScope;
}

const REALM = 'bridge operator API';
// Longer than any token the CLI hands out: refused before hashing or querying.
const MAX_TOKEN_LENGTH = 512;

export { tokenDigest };

/** The token of an `Authorization: Bearer <token>` header; undefined when there is none or another scheme. */
export function bearerTokenOf(header: string | undefined): string | undefined {
  const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(header ?? '');
  return match?.[1];
}

function unauthorized(res: Response, message: string, invalid: boolean): void {
  res.set('www-authenticate', invalid ? `Bearer realm="${REALM}", error="invalid_token"` : `Bearer realm="${REALM}"`);
  res.status(401).json({ error: 'unauthorized', message });
}

/** The caller a request authenticated as (set by `authenticate`). */
export function callerOf(res: Response): ApiCaller {
  return res.locals.caller as ApiCaller;
}

/**
 * Authenticates every request of the router it is used in. A throttled client is refused before its
 * token is looked up, so guessing costs no query; a missing header is no guess and is not counted.
 */
export function authenticate(pool: pg.Pool, throttle: SignInThrottle, logger: Logger) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const address = req.socket.remoteAddress ?? '';
    const wait = throttle.retryAfterSeconds(address);
    if (wait > 0) {
      logger.warn({ api: `${req.method} ${req.path}`, address, refused: 'throttled' }, 'operator API request refused');
      res.set('retry-after', String(wait));
      return void res
        .status(429)
        .json({ error: 'throttled', message: `too many failed tokens from your address or network: try again in ${wait} s` });
    }
    const token = bearerTokenOf(req.headers.authorization);
    if (token === undefined)
      return unauthorized(res, 'send an operator token: Authorization: Bearer <token> (bridge tokens create)', false);
    const row = token.length > MAX_TOKEN_LENGTH ? undefined : await useTokenRow(pool, tokenDigest(token));
    if (row === undefined) {
      throttle.failed(address);
      logger.warn({ api: `${req.method} ${req.path}`, address, refused: 'unknown or revoked token' }, 'operator API request refused');
      return unauthorized(res, 'unknown or revoked operator token', true);
    }
    res.locals.caller = { name: row.name, scope: row.scope } satisfies ApiCaller;
    next();
  };
}

/** For a change: the token must have the write scope (403 otherwise, saying so). */
export function requireWrite(_req: Request, res: Response, next: NextFunction): void {
  const caller = callerOf(res);
  if (caller.scope === 'write') return next();
  res.set('www-authenticate', `Bearer realm="${REALM}", error="insufficient_scope", scope="write"`);
  res.status(403).json({ error: 'forbidden', message: `token "${caller.name}" has the read scope: changes need a write token` });
}
