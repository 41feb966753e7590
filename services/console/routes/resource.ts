// The resource page: GET /resource (its Reconcile form posts to routes/reconcile.ts).
import { Router } from 'express';
import { resourcePage } from '../pages/resource.ts';
import { loadResource } from '../readers.ts';
import { text, type RouteContext } from './context.ts';
import { reconcileAvailability, type ReconcileSetup } from './reconcile.ts';

export function resourceRoutes({ clients, ctxOf, send, route }: RouteContext, reconcile: ReconcileSetup): Router {
  const router = Router();
  router.get(
    '/resource',
    route(async (req, res) => {
      const q = {
        tenant: text(req.query.tenant),
        type: text(req.query.type),
        id: text(req.query.id),
        a: text(req.query.a),
        b: text(req.query.b),
      };
      const view =
        q.tenant && q.type && q.id
          ? await loadResource(clients, { tenant_id: q.tenant, resource_type: q.type, resource_id: q.id })
          : undefined;
      send(res, resourcePage(ctxOf(req), q, view, q.tenant && q.type ? reconcileAvailability(reconcile, q.tenant, q.type) : undefined));
    }),
  );
  return router;
}
