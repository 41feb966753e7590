// The sources pages: GET /sources, /sources/new, /sources/audit, /sources/<id> (or /sources/show?id=),
// /sources/edit?id=; and the actions POST /sources/create, /sources/update, /sources/enabled and
// /sources/rotate, each behind the guard (session, CSRF token, Origin) and logged with who did it.
// They call the SourceCatalog in-process, the one place that changes sources (as the operator API
// and the CLI do), so the rules, the revision check (412) and the audit row are the same.
import { Router, type Request, type Response } from 'express';
import { CatalogError, SourceCatalog, SourceInputError, type SourceView } from '#domain/sources/index.ts';
import { listInstances } from '#domain/store/sources.ts';
import { isRefusal, type Session } from '../guard.ts';
import { refusedPage } from '../pages/search.ts';
import { sourceHrefWith } from '../pages/source-links.ts';
import {
  EXAMPLE_SPEC,
  editSourcePage,
  newSourcePage,
  sourceCreatedPage,
  sourceMissingPage,
  sourcePage,
  sourceRotatedPage,
  sourcesListPage,
  type FormRefusal,
  type RotateForm,
} from '../pages/sources.ts';
import { AUDIT_PAGE, auditPage } from '../pages/sources-audit.ts';
import { text, type RouteContext } from './context.ts';

/**
 * Who the audit log names for a change made here. The console has one operator token, so one actor;
 * the name typed at sign-in is unverified and goes to the console's log line only.
 */
export const CONSOLE_ACTOR = 'console:operator';
/** Changes listed on a source's page; older ones on the audit page. */
const SOURCE_AUDIT_ROWS = 20;
/** The default overlap of a rotation: a day for the provider to switch. */
const DEFAULT_OVERLAP_MS = 24 * 3600 * 1000;

const isoSeconds = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The refusal a form shows for a catalog error; undefined for anything else (a failure, not a refusal). */
export function refusalOf(error: unknown): FormRefusal | undefined {
  if (error instanceof SourceInputError)
    return {
      status: error.status,
      message:
        error.status === 400
          ? 'Refused: a field is unknown or of the wrong type. Nothing was changed.'
          : 'Refused: the values break a rule. Nothing was changed.',
      problems: error.problems,
    };
  if (error instanceof CatalogError) {
    if (error.status === 412)
      return {
        status: 412,
        message: `This source changed meanwhile: reload it and make your change again. Nothing was changed. (${error.message})`,
        problems: [],
      };
    return { status: error.status, message: `Refused: ${error.message}. Nothing was changed.`, problems: [] };
  }
  return undefined;
}

/**
 * The JSON of a textarea. V8's parse errors quote the text, which may hold something pasted by
 * mistake (a secret): only the fault and its position are kept.
 */
export function parseSpecText(value: string | undefined): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value ?? '');
  } catch (error) {
    const fault = (error as Error).message.replace(/, ".*" is not valid JSON$/s, '').replace(/^(Unexpected token .)(?: in JSON)?/, '$1');
    throw new SourceInputError(400, [{ path: 'spec', message: `not valid JSON: ${fault}` }]);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new SourceInputError(400, [{ path: 'spec', message: 'must be a JSON object: {"id": …, "tenants": […], …}' }]);
  return parsed as Record<string, unknown>;
}

function revisionOf(body: Record<string, unknown>): number {
  const value = text(body.revision);
  if (value === undefined || !/^\d{1,15}$/.test(value))
    throw new SourceInputError(400, [{ path: 'revision', message: 'the form carries no revision: reload the page' }]);
  return Number(value);
}

/** The secret the form asks for: one the bridge generates, or the value pasted. */
function secretInput(body: Record<string, unknown>, path: string): { value: string } | { generate: true } {
  if (body.secret_mode !== 'value') return { generate: true };
  const value = text(body.secret_value);
  if (value === undefined) throw new SourceInputError(422, [{ path, message: 'paste the value, or choose "generate one"' }]);
  return { value };
}

const modeOf = (body: Record<string, unknown>) => (body.secret_mode === 'value' ? ('value' as const) : ('generate' as const));

export function sourcesRoutes({ config, clients, logger, ctxOf, send, authorize, route }: RouteContext): Router {
  const router = Router();
  const catalog = new SourceCatalog(clients.pool, config.secretKeyring);
  const keyringSet = config.secretKeyring !== undefined;
  const defaultRotate = (): RotateForm => ({
    secretId: '',
    mode: 'generate',
    retireOthersAfter: isoSeconds(Date.now() + DEFAULT_OVERLAP_MS),
  });

  /** An action: the guard first; a refusal is logged and answered with its status. */
  const action = (name: string, fn: (req: Request, res: Response, session: Session, body: Record<string, unknown>) => Promise<void>) =>
    route(async (req, res) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const session = authorize(req);
      if (isRefusal(session)) {
        logger.warn({ action: name, source: text(body.id), refused: session.reason }, 'console action refused');
        return void send(res, refusedPage(ctxOf(req), session.reason), session.status);
      }
      await fn(req, res, session, body);
    });

  /** Loads a source, or answers 404; undefined when answered. */
  const load = async (req: Request, res: Response, id: string): Promise<SourceView | undefined> => {
    try {
      return await catalog.get(id);
    } catch (error) {
      if (error instanceof CatalogError && error.status === 404) return void send(res, sourceMissingPage(ctxOf(req), id), 404);
      throw error;
    }
  };

  const showSource = async (
    req: Request,
    res: Response,
    id: string,
    extra: { status?: number; rotate?: RotateForm; rotateRefusal?: FormRefusal; refusal?: FormRefusal } = {},
  ) => {
    const source = await load(req, res, id);
    if (source === undefined) return;
    const audit = await catalog.history({ sourceId: id, limit: SOURCE_AUDIT_ROWS });
    const notice = text(req.query.done);
    send(
      res,
      sourcePage(ctxOf(req), {
        source,
        audit,
        auditLimit: SOURCE_AUDIT_ROWS,
        now: Date.now(),
        keyringSet,
        notice: req.method === 'GET' ? notice : undefined,
        rotate: extra.rotate ?? defaultRotate(),
        rotateRefusal: extra.rotateRefusal,
        refusal: extra.refusal,
      }),
      extra.status ?? 200,
    );
  };

  router.get(
    '/sources',
    route(async (req, res) => {
      const [sources, version, instances] = await Promise.all([catalog.list(), catalog.configVersion(), listInstances(clients.pool)]);
      send(res, sourcesListPage(ctxOf(req), { sources, version, instances, keyringSet, now: Date.now() }));
    }),
  );

  router.get('/sources/new', (req, res) =>
    send(
      res,
      newSourcePage(
        ctxOf(req),
        { specText: JSON.stringify(EXAMPLE_SPEC, null, 2), secretId: 'k1', mode: 'generate' },
        undefined,
        keyringSet,
      ),
    ),
  );

  router.get(
    '/sources/audit',
    route(async (req, res) => {
      const source = text(req.query.source);
      const beforeText = text(req.query.before);
      if (beforeText !== undefined && !/^\d{1,15}$/.test(beforeText))
        return void send(res, refusedPage(ctxOf(req), 'before must be an entry id, as the Older link gives'), 400);
      const before = beforeText === undefined ? undefined : Number(beforeText);
      const entries = await catalog.history({
        limit: AUDIT_PAGE,
        ...(source === undefined ? {} : { sourceId: source }),
        ...(before === undefined ? {} : { beforeId: before }),
      });
      send(res, auditPage(ctxOf(req), entries, { source, before }));
    }),
  );

  router.get(
    '/sources/show',
    route(async (req, res) => showSource(req, res, text(req.query.id) ?? '')),
  );

  router.get(
    '/sources/edit',
    route(async (req, res) => {
      const id = text(req.query.id) ?? '';
      const source = await load(req, res, id);
      if (source === undefined) return;
      send(res, editSourcePage(ctxOf(req), { id, revision: source.revision, specText: JSON.stringify(source.spec, null, 2) }));
    }),
  );

  router.get(
    '/sources/:id',
    route(async (req, res) => showSource(req, res, text(req.params.id) ?? '')),
  );

  router.post(
    '/sources/create',
    action('source-create', async (req, res, session, body) => {
      const form = { specText: text(body.spec) ?? '', secretId: text(body.secret_id) ?? '', mode: modeOf(body) };
      try {
        const spec = parseSpecText(form.specText);
        if ('secrets' in spec)
          throw new SourceInputError(400, [{ path: 'secrets', message: 'give the secret in the Secret fields below the spec, not in it' }]);
        const secret = { id: form.secretId, ...secretInput(body, 'secrets.0.value') };
        const { source, generated } = await catalog.create(CONSOLE_ACTOR, { ...spec, secrets: [secret] });
        logger.info(
          { action: 'source-create', operator: session.operator, source: source.id, secret_id: secret.id, generated: generated.length > 0 },
          'source created',
        );
        // The generated value is on this answer only: no cache may keep it.
        res.set('cache-control', 'no-store');
        send(res, sourceCreatedPage(ctxOf(req), source, generated));
      } catch (error) {
        const refusal = refusalOf(error);
        if (refusal === undefined) throw error;
        logger.warn(
          { action: 'source-create', operator: session.operator, refused: refusal.status, problems: refusal.problems },
          'console action refused',
        );
        send(res, newSourcePage(ctxOf(req), form, refusal, keyringSet), refusal.status);
      }
    }),
  );

  router.post(
    '/sources/update',
    action('source-update', async (req, res, session, body) => {
      const id = text(body.id) ?? '';
      const specText = text(body.spec) ?? '';
      let revision = 0;
      try {
        revision = revisionOf(body);
        const source = await catalog.update(CONSOLE_ACTOR, id, revision, parseSpecText(specText));
        logger.info({ action: 'source-update', operator: session.operator, source: id, revision: source.revision }, 'source updated');
        res.redirect(303, sourceHrefWith(id, { done: 'updated' }));
      } catch (error) {
        const refusal = refusalOf(error);
        if (refusal === undefined) throw error;
        logger.warn(
          { action: 'source-update', operator: session.operator, source: id, refused: refusal.status, problems: refusal.problems },
          'console action refused',
        );
        if (refusal.status === 404) return void send(res, sourceMissingPage(ctxOf(req), id), 404);
        send(res, editSourcePage(ctxOf(req), { id, revision, specText }, refusal), refusal.status);
      }
    }),
  );

  router.post(
    '/sources/enabled',
    action('source-enabled', async (req, res, session, body) => {
      const id = text(body.id) ?? '';
      const enabled = body.enabled === 'true';
      try {
        if (body.enabled !== 'true' && body.enabled !== 'false')
          throw new SourceInputError(400, [{ path: 'enabled', message: 'must be true or false' }]);
        await catalog.setEnabled(CONSOLE_ACTOR, id, revisionOf(body), enabled);
        logger.info({ action: enabled ? 'source-enable' : 'source-disable', operator: session.operator, source: id }, 'source switched');
        res.redirect(303, sourceHrefWith(id, { done: enabled ? 'enabled' : 'disabled' }));
      } catch (error) {
        const refusal = refusalOf(error);
        if (refusal === undefined) throw error;
        logger.warn(
          { action: 'source-enabled', operator: session.operator, source: id, refused: refusal.status },
          'console action refused',
        );
        if (refusal.status === 404) return void send(res, sourceMissingPage(ctxOf(req), id), 404);
        // The page as it is now, with why nothing changed: a reload in one.
        await showSource(req, res, id, { status: refusal.status, refusal });
      }
    }),
  );

  router.post(
    '/sources/rotate',
    action('source-rotate', async (req, res, session, body) => {
      const id = text(body.id) ?? '';
      const secretId = text(body.secret_id);
      const form: RotateForm = { secretId: secretId ?? '', mode: modeOf(body), retireOthersAfter: text(body.retire_others_after) ?? '' };
      try {
        const revision = revisionOf(body);
        const input = {
          ...(secretId === undefined ? {} : { secretId }),
          ...secretInput(body, 'value'),
          retireOthersAfter: form.retireOthersAfter,
        };
        const result = await catalog.rotate(CONSOLE_ACTOR, id, revision, input);
        logger.info(
          {
            action: 'source-rotate',
            operator: session.operator,
            source: id,
            secret_id: result.secretId,
            retire_others_after: form.retireOthersAfter,
          },
          'source secret rotated',
        );
        res.set('cache-control', 'no-store');
        send(res, sourceRotatedPage(ctxOf(req), result.source, result.secretId, result.generated));
      } catch (error) {
        const refusal = refusalOf(error);
        if (refusal === undefined) throw error;
        logger.warn(
          { action: 'source-rotate', operator: session.operator, source: id, refused: refusal.status, problems: refusal.problems },
          'console action refused',
        );
        if (refusal.status === 404) return void send(res, sourceMissingPage(ctxOf(req), id), 404);
        await showSource(req, res, id, { status: refusal.status, rotate: form, rotateRefusal: refusal });
      }
    }),
  );
  return router;
}
