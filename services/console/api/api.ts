// The operator API, /api/v1: sources read and changed as JSON by scripts, the CLI and CI. It is a
// thin layer over the SourceCatalog (the one place that changes sources): HTTP in, the catalog's
// answer or refusal out. Every change names the revision it read (If-Match); the catalog refuses a
// stale one (412), runs the change in one transaction and writes the audit row, the token's name
// as its actor. Mounted by the console behind its Host check, so the same names and TLS rule hold.
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import type pg from 'pg';
import type { Logger } from '#plumbing/logging/logger.ts';
import { listInstances } from '#domain/store/sources.ts';
import { CatalogError, SecretKeyError, SourceCatalog, SourceInputError, parseInput, type SecretKeyring } from '#domain/sources/index.ts';
import type { SignInThrottle } from '../guard.ts';
import { authenticate, callerOf, requireWrite } from './auth.ts';
import { openApiDocument } from './openapi.ts';
import { auditQuerySchema, sourceIdSchema } from './schemas.ts';

export const API_PREFIX = '/api/v1';
// A source is a few kilobytes, strict schemas included; more is a mistake or an attack.
const BODY_LIMIT = '128kb';

export interface OperatorApiDeps {
  pool: pg.Pool;
  /** BRIDGE_SECRET_KEYS; without it a change that seals or opens a secret is refused (503). */
  keyring: SecretKeyring | undefined;
  logger: Logger;
  /** The console's sign-in throttle: one budget of failures per client for both doors. */
  throttle: SignInThrottle;
}

/** A refusal of the request itself (its headers or body), before the catalog is asked. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The revision an If-Match header names: a change without one is refused (428), never applied blind. */
export function revisionFromIfMatch(header: string | undefined): number {
  if (header === undefined || header.trim() === '')
    throw new ApiError(
      428,
      'precondition_required',
      'send If-Match: "<revision>", the ETag of the source as you read it (GET /api/v1/sources/{id}), so a change made meanwhile is not overwritten',
    );
  const match = /^\s*"(\d{1,15})"\s*$/.exec(header);
  if (!match) throw new ApiError(400, 'invalid_if_match', 'If-Match must be one ETag as GET /api/v1/sources/{id} gives it, e.g. "3"');
  return Number(match[1]);
}

const etag = (revision: number) => `"${revision}"`;

/**
 * The JSON body. Node's parse errors quote the text around the fault, which may be a secret the
 * request carried: the answer names the fault and its position only.
 */
function bodyOf(req: Request): unknown {
  const json = req.is('application/json');
  if (json === null) throw new ApiError(400, 'body_required', 'this request needs a JSON body (Content-Type: application/json)');
  if (json === false) throw new ApiError(415, 'unsupported_media_type', 'send the body as JSON (Content-Type: application/json)');
  return req.body;
}

export function jsonFaultOf(message: string): string {
  return message.replace(/, ".*" is not valid JSON$/s, '').replace(/^(Unexpected token .)(?: in JSON)?/, '$1');
}

function bodyParserError(error: unknown): { status: number; type: string; message: string } | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { status, type, message } = error as { status?: unknown; type?: unknown; message?: unknown };
  if (typeof status !== 'number' || typeof type !== 'string' || status < 400 || status >= 500) return undefined;
  return { status, type, message: typeof message === 'string' ? message : '' };
}

/** Methods a path answers; another one is 405 with Allow. */
function only(...methods: string[]) {
  return (_req: Request, res: Response) => {
    res.set('allow', methods.join(', '));
    res.status(405).json({ error: 'method_not_allowed', message: `this path answers ${methods.join(', ')}` });
  };
}

export function operatorApi({ pool, keyring, logger, throttle }: OperatorApiDeps): Router {
  const catalog = new SourceCatalog(pool, keyring);
  const router = Router();
  const changed = (res: Response, action: string, sourceId: string, detail: Record<string, unknown> = {}) =>
    logger.info({ api: action, source: sourceId, actor: callerOf(res).name, ...detail }, 'operator API change');

  router.use((_req, res, next) => {
    // Answers may carry a generated secret (and otherwise the state of the bridge's doors): no cache keeps them.
    res.set('cache-control', 'no-store');
    next();
  });
  // The document holds no data (it is committed in docs/): no token needed to read it.
  router.get('/openapi.json', (_req, res) => void res.json(openApiDocument()));

  router.use(authenticate(pool, throttle, logger));
  router.use(express.json({ limit: BODY_LIMIT, strict: true }));
  router.param('id', (_req, _res, next, id: string) => {
    const parsed = sourceIdSchema.safeParse(id);
    if (parsed.success) return next();
    next(new SourceInputError(400, [{ path: 'id', message: `the source id in the path ${parsed.error.issues[0]!.message}` }]));
  });

  router
    .route('/sources')
    .get(async (_req, res) => {
      // The version first: the list is at least as new as the version it is shown with.
      const configVersion = await catalog.configVersion();
      res.json({ configVersion, sources: await catalog.list() });
    })
    .post(requireWrite, async (req, res) => {
      const { source, generated } = await catalog.create(callerOf(res).name, bodyOf(req));
      changed(res, 'create', source.id, { revision: source.revision, generated: generated.map((g) => g.id) });
      res.status(201).set({ location: `${API_PREFIX}/sources/${encodeURIComponent(source.id)}`, etag: etag(source.revision) });
      res.json({ source, generatedSecrets: generated });
    })
    .all(only('GET', 'HEAD', 'POST'));

  router
    .route('/sources/:id')
    .get(async (req, res) => {
      const source = await catalog.get(req.params.id!);
      res.set('etag', etag(source.revision)).json(source);
    })
    .put(requireWrite, async (req, res) => {
      const revision = revisionFromIfMatch(req.headers['if-match']);
      const source = await catalog.update(callerOf(res).name, req.params.id!, revision, bodyOf(req));
      changed(res, 'update', source.id, { revision: source.revision });
      res.set('etag', etag(source.revision)).json(source);
    })
    .delete(requireWrite, async (req, res) => {
      const revision = revisionFromIfMatch(req.headers['if-match']);
      await catalog.remove(callerOf(res).name, req.params.id!, revision);
      changed(res, 'delete', req.params.id!);
      res.status(204).end();
    })
    .all(only('GET', 'HEAD', 'PUT', 'DELETE'));

  for (const [action, enabled] of [
    ['enable', true],
    ['disable', false],
  ] as const)
    router
      .route(`/sources/:id/${action}`)
      .post(requireWrite, async (req, res) => {
        const revision = revisionFromIfMatch(req.headers['if-match']);
        const source = await catalog.setEnabled(callerOf(res).name, req.params.id!, revision, enabled);
        changed(res, action, source.id, { revision: source.revision });
        res.set('etag', etag(source.revision)).json(source);
      })
      .all(only('POST'));

  router
    .route('/sources/:id/rotate')
    .post(requireWrite, async (req, res) => {
      const revision = revisionFromIfMatch(req.headers['if-match']);
      const { source, secretId, generated } = await catalog.rotate(callerOf(res).name, req.params.id!, revision, bodyOf(req));
      changed(res, 'rotate', source.id, { revision: source.revision, secret: secretId });
      res.set('etag', etag(source.revision));
      res.json({ source, secretId, generatedSecrets: generated === undefined ? [] : [{ id: secretId, value: generated }] });
    })
    .all(only('POST'));

  router
    .route('/audit')
    .get(async (req, res) => {
      let query;
      try {
        query = parseInput(auditQuerySchema, req.query);
      } catch (error) {
        // A query string is the request's shape, whatever the rule it breaks.
        throw error instanceof SourceInputError ? new SourceInputError(400, error.problems) : error;
      }
      const entries = await catalog.history({
        limit: query.limit,
        ...(query.source === undefined ? {} : { sourceId: query.source }),
        ...(query.before === undefined ? {} : { beforeId: query.before }),
      });
      const last = entries.at(-1);
      res.json({ entries, ...(entries.length === query.limit && last !== undefined ? { nextBefore: last.id } : {}) });
    })
    .all(only('GET', 'HEAD'));

  router
    .route('/config')
    .get(async (_req, res) => {
      const configVersion = await catalog.configVersion();
      const instances = (await listInstances(pool)).map((i) => ({
        instance: i.instance,
        role: i.role,
        configVersion: i.configVersion,
        seenAt: i.seenAt.toISOString(),
        behind: i.configVersion < configVersion,
      }));
      res.json({ configVersion, instances });
    })
    .all(only('GET', 'HEAD'));

  // Nothing under /api/v1 falls through to the console's pages (or their sign-in redirect).
  router.use((req, res) => {
    res.status(404).json({
      error: 'not_found',
      message: `no ${req.method} ${req.originalUrl.split('?')[0]} in the operator API (see ${API_PREFIX}/openapi.json)`,
    });
  });

  router.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
    if (error instanceof SourceInputError) return void res.status(error.status).json({ error: 'invalid', problems: error.problems });
    if (error instanceof CatalogError) return void res.status(error.status).json({ error: error.code, message: error.message });
    if (error instanceof ApiError) return void res.status(error.status).json({ error: error.code, message: error.message });
    // Names the key, never a value: a sealed secret whose key this console lacks.
    if (error instanceof SecretKeyError) return void res.status(503).json({ error: 'secret_key', message: error.message });
    const parser = bodyParserError(error);
    if (parser) {
      const message =
        parser.type === 'entity.parse.failed'
          ? `the body is not valid JSON: ${jsonFaultOf(parser.message)}`
          : parser.type === 'entity.too.large'
            ? `the body is larger than ${BODY_LIMIT}`
            : parser.message;
      return void res.status(parser.status).json({ error: parser.type === 'entity.parse.failed' ? 'invalid_json' : parser.type, message });
    }
    logger.error({ err: error, api: `${req.method} ${req.path}` }, 'operator API request failed');
    res.status(500).json({ error: 'internal', message: "the operator API failed: the console's log says why" });
  });
  return router;
}
