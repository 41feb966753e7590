// The overview page: GET /.
import { Router } from 'express';
import { overviewPage } from '../pages/overview.ts';
import { loadOverview } from '../readers.ts';
import type { RouteContext } from './context.ts';

export function overviewRoutes({ config, clients, ctxOf, send, route }: RouteContext): Router {
  const router = Router();
  router.get(
    '/',
    route(async (req, res) => void send(res, overviewPage(ctxOf(req), await loadOverview(clients, config)))),
  );
  return router;
}
