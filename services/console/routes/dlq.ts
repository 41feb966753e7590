// The dead-letter pages: GET /dlq (the list), GET /dlq/record, and POST /dlq/replay (preview, then
// replay once confirmed; an action behind the guard, logged with who did it).
import { Router } from 'express';
import { inboxKeyOf, latestPerEvent, type DlqEntry } from '#domain/operations/dlq-records.ts';
import { inboxStatuses, replayDeadLetters, replayPlan } from '#domain/operations/dlq-replay/index.ts';
import { parseCursor } from '#domain/operations/dlq-window.ts';
import { isRefusal } from '../guard.ts';
import { dlqListPage, dlqRecordPage, parseFilter, replayPreviewPage, replayResultPage, type DlqFilterText } from '../pages/dlq.ts';
import { refusedPage } from '../pages/search.ts';
import { loadDlqExpiry, loadDlqPage, loadDlqRecords } from '../readers.ts';
import { list, text, type RouteContext } from './context.ts';

/** How long a replay from the page waits for outcomes before it answers. */
const REPLAY_WAIT_MS = 30_000;
/** Replay of all that match a filter: at most this many records, found reading at most this many. */
const REPLAY_BY_FILTER = { limit: 1000, scanBudget: 20_000 } as const;

const filterTextOf = (source: Record<string, unknown>, prefix = ''): DlqFilterText => ({
  reason: text(source[`${prefix}reason`]),
  source: text(source[`${prefix}source`]),
  tenant: text(source[`${prefix}tenant`]),
  since: text(source[`${prefix}since`]),
  until: text(source[`${prefix}until`]),
});

export function dlqRoutes({ config, clients, logger, ctxOf, send, authorize, route }: RouteContext): Router {
  const router = Router();
  router.get(
    '/dlq',
    route(async (req, res) => {
      const filterText = filterTextOf(req.query as Record<string, unknown>);
      const { filter, error } = parseFilter(filterText);
      const beforeText = text(req.query.before);
      const before = beforeText === undefined ? undefined : parseCursor(beforeText);
      if (error || (beforeText !== undefined && before === undefined)) {
        const problem = error ?? 'before must be partition:offset pairs, as the Older link gives';
        return void send(res, dlqListPage(ctxOf(req), filterText, undefined, config.names.dlq, problem), 400);
      }
      const view = await loadDlqPage(clients, config, filter, before);
      send(res, dlqListPage(ctxOf(req), filterText, view, config.names.dlq));
    }),
  );

  router.get(
    '/dlq/record',
    route(async (req, res) => {
      const refText = text(req.query.ref) ?? '';
      const [view, expiry] = await Promise.all([loadDlqRecords(clients, config, [refText]), loadDlqExpiry(clients, config)]);
      send(res, dlqRecordPage(ctxOf(req), refText, view, expiry), view.entries.ok && view.entries.value.length === 0 ? 404 : 200);
    }),
  );

  router.post(
    '/dlq/replay',
    route(async (req, res) => {
      const session = authorize(req);
      if (isRefusal(session)) {
        logger.warn({ action: 'dlq-replay', refused: session.reason }, 'console action refused');
        return void send(res, refusedPage(ctxOf(req), session.reason), session.status);
      }
      const body = req.body as Record<string, unknown>;
      const confirm = body.confirm === 'yes';
      let entries: DlqEntry[];
      if (body.scope === 'filter') {
        const { filter, error } = parseFilter(filterTextOf(body, 'filter_'));
        if (error) return void send(res, refusedPage(ctxOf(req), error), 400);
        // All that match in the time window, read at most to a bound: a wider window is narrowed first.
        const view = await loadDlqPage(clients, config, filter, undefined, REPLAY_BY_FILTER);
        if (!view.window.ok) return void send(res, refusedPage(ctxOf(req), view.window.problem), 503);
        if (view.window.value.next !== undefined)
          return void send(
            res,
            refusedPage(
              ctxOf(req),
              `More than ${REPLAY_BY_FILTER.limit} records match, or the time window holds more than ${REPLAY_BY_FILTER.scanBudget}: narrow since and until, or replay the selected records.`,
            ),
            400,
          );
        entries = view.window.value.entries;
      } else {
        const read = await loadDlqRecords(clients, config, list(body.ref));
        if (!read.entries.ok) return void send(res, refusedPage(ctxOf(req), read.entries.problem), 503);
        entries = read.entries.value;
      }
      const toReplay = latestPerEvent(entries);
      const plan = replayPlan(toReplay);
      const replayRefs = plan.map((p) => p.from);
      if (!confirm) {
        const statuses = await inboxStatuses(clients.pool, toReplay).catch(() => undefined);
        const byRef = new Map(
          toReplay.flatMap((e) => {
            const s = statuses?.get(inboxKeyOf(e) ?? '');
            return s ? [[`${e.partition}:${e.offset}`, s] as const] : [];
          }),
        );
        logger.info({ action: 'dlq-replay-preview', operator: session.operator, records: replayRefs }, 'replay previewed');
        return void send(res, replayPreviewPage(ctxOf(req), plan, replayRefs, byRef, config.names.events));
      }
      logger.info(
        { action: 'dlq-replay', operator: session.operator, records: replayRefs, event_ids: plan.map((p) => p.event_id) },
        'replay started',
      );
      const outcomes = await clients.withAdmin((admin) =>
        replayDeadLetters({ kafka: clients.kafka, admin, names: config.names, group: config.group, logger }, clients.pool, toReplay, {
          wait: true,
          timeoutMs: REPLAY_WAIT_MS,
        }),
      );
      logger.info(
        {
          action: 'dlq-replay',
          operator: session.operator,
          outcomes: outcomes.map((o) => ({ from: o.from, event_id: o.event_id, status: o.status })),
        },
        'replay done',
      );
      send(res, replayResultPage(ctxOf(req), outcomes));
    }),
  );
  return router;
}
