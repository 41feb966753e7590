// The search page: GET /search.
import { Router } from 'express';
import { searchPage } from '../pages/search.ts';
import { search } from '../readers.ts';
import { text, type RouteContext } from './context.ts';

export function searchRoutes({ clients, ctxOf, send, route }: RouteContext): Router {
  const router = Router();
  router.get(
    '/search',
    route(async (req, res) => {
      const term = text(req.query.q)?.trim() ?? '';
      send(res, searchPage(ctxOf(req), term, term ? await search(clients, term) : undefined));
    }),
  );
  return router;
}
