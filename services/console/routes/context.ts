// What every page's routes share: the clients, the guard, and the request helpers (the page context
// of a request, sending HTML, authorizing an action, catching a failed page). startConsole builds
// one and hands it to each page's routes.
import type { Request, Response } from 'express';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { ConsoleConfig } from '../config.ts';
import { sessionIdFrom, type GuardRefusal, type OperatorGuard, type Session } from '../guard.ts';
import type { PageContext } from '../pages/layout.ts';
import { refusedPage } from '../pages/search.ts';
import type { ConsoleClients } from '../readers.ts';

export interface RouteContext {
  config: ConsoleConfig;
  clients: ConsoleClients;
  logger: Logger;
  guard: OperatorGuard;
  /** The origin the browser used to reach this page: a POST must come from it (an Origin check). */
  ownOrigin: (req: Request) => string;
  originOf: (req: Request) => string | undefined;
  sessionOf: (req: Request) => Session | undefined;
  ctxOf: (req: Request) => PageContext;
  send: (res: Response, body: string, status?: number) => void;
  authorize: (req: Request) => Session | GuardRefusal;
  /** An async page whose failure is logged and answered 500 with a page saying why. */
  route: (fn: (req: Request, res: Response) => Promise<void>) => (req: Request, res: Response) => void;
}

export function routeContext(config: ConsoleConfig, clients: ConsoleClients, logger: Logger, guard: OperatorGuard): RouteContext {
  const scheme = config.https ? 'https' : 'http';
  const ownOrigin = (req: Request) => `${scheme}://${req.headers.host ?? ''}`;
  const sessionOf = (req: Request): Session | undefined => guard.session(sessionIdFrom(req.headers.cookie));
  const ctxOf = (req: Request): PageContext => {
    const s = sessionOf(req);
    return { operator: s?.operator, csrf: s?.csrf, actionsEnabled: guard.actionsEnabled, path: req.path };
  };
  const send = (res: Response, body: string, status = 200) => void res.status(status).type('html').send(body);
  const originOf = (req: Request) => req.headers.origin ?? req.headers.referer;
  const authorize = (req: Request) =>
    guard.authorize({
      sessionId: sessionIdFrom(req.headers.cookie),
      csrf: (req.body as Record<string, unknown>)?.csrf,
      origin: originOf(req),
      expectedOrigin: ownOrigin(req),
    });
  const route = (fn: (req: Request, res: Response) => Promise<void>) => (req: Request, res: Response) => {
    fn(req, res).catch((error: unknown) => {
      logger.error({ err: error, path: req.path }, 'page failed');
      if (!res.headersSent) send(res, refusedPage(ctxOf(req), `This page failed: ${(error as Error).message}`), 500);
    });
  };
  return { config, clients, logger, guard, ownOrigin, originOf, sessionOf, ctxOf, send, authorize, route };
}

export function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

export function list(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return typeof value === 'string' ? [value] : [];
}
