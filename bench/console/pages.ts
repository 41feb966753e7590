// The console pages bench:console times on the big bridge (test/kit/big-bridge.ts), each with its
// goal and what its answer must show: a timed error page, or one missing its records, would pass
// for a fast one. The goals, once asserted inside `npm test` by test/console/cheap-pages.test.ts: a
// page that reads Postgres only answers within 250 ms, one that also asks the broker within
// 1,000 ms, as the median of the rounds.
import { BIG_BRIDGE, bigDlqRef } from '../../test/kit/big-bridge.ts';
import { spread } from '../lib/spread.ts';

export const POSTGRES_PAGE_GOAL_MS = 250;
export const BROKER_PAGE_GOAL_MS = 1000;

export interface PageSpec {
  name: string;
  path: string;
  /** The page's median over the rounds must not exceed it. */
  goalMs: number;
  /** Why the answer is not the page asked for; undefined when it is. */
  wrong: (text: string) => string | undefined;
}

const DAY_MS = 24 * 3600 * 1000;
/** A row the search pages must find, as the test searches for it. */
const SEARCHED = 424_242;

const shows = (needle: string) => (text: string) => (text.includes(needle) ? undefined : `does not show ${needle}`);

/** Dead letter numbers (i of the fill) a list page shows, in its order. */
export function dlqRows(text: string): number[] {
  return [...text.matchAll(/data-event-id="evt_dlq_(\d+)"/g)].map((m) => Number(m[1]));
}

/** Records a dead-letter list page read from the broker ("N read for this page"); undefined for other pages. */
export function dlqRecordsRead(text: string): number | undefined {
  const m = /(\d+) read for this page/.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** The list page's Older link, `&` unescaped. */
export function olderLink(text: string): string | undefined {
  return /href="(\/dlq\?[^"]*before=[^"]*)"/.exec(text.replaceAll('&amp;', '&'))?.[1];
}

const dlqList =
  (expect: (rows: number[]) => string | undefined) =>
  (text: string): string | undefined => {
    if (dlqRecordsRead(text) === undefined) return 'has no count of records read (the broker part failed?)';
    const rows = dlqRows(text);
    return rows.length === 0 ? 'shows no dead letter' : expect(rows);
  };

/**
 * Every page, in the order a round requests them. `older` is the newest page's Older link (found
 * once: the DLQ does not change during the run); `now` the fill's time, which placed the records.
 */
export function consolePages(now: number, older: string): PageSpec[] {
  const { dlqRecords, tenants } = BIG_BRIDGE;
  const since = new Date(now - 15 * DAY_MS).toISOString();
  const until = new Date(now - 14 * DAY_MS).toISOString();
  const found = `evt_big_${SEARCHED}<`;
  const search = (name: string, q: string): PageSpec => ({
    name: `search: ${name}`,
    path: `/search?q=${q}`,
    goalMs: POSTGRES_PAGE_GOAL_MS,
    wrong: shows(found),
  });
  return [
    { name: 'overview', path: '/', goalMs: BROKER_PAGE_GOAL_MS, wrong: shows('data-outcome="applied"') },
    search('event id', `evt_big_${SEARCHED}`),
    search('idempotency key', `idem_big_${SEARCHED}`),
    search('trace id', SEARCHED.toString(16).padStart(32, '0')),
    search('resource key', `tenant_big_${SEARCHED % tenants}/theme/thm_big_${SEARCHED % 100000}`),
    search('resource id', `thm_big_${SEARCHED % 100000}`),
    {
      name: 'dlq: newest',
      path: '/dlq',
      goalMs: BROKER_PAGE_GOAL_MS,
      wrong: dlqList((rows) => (rows[0] === dlqRecords - 1 ? undefined : `starts at evt_dlq_${rows[0]}`)),
    },
    {
      name: 'dlq: tenant',
      path: '/dlq?tenant=tenant_dlq_7',
      goalMs: BROKER_PAGE_GOAL_MS,
      wrong: dlqList((rows) => (rows.every((n) => n % tenants === 7) ? undefined : 'shows another tenant')),
    },
    {
      name: 'dlq: reason',
      path: '/dlq?reason=invalid_envelope',
      goalMs: BROKER_PAGE_GOAL_MS,
      wrong: dlqList((rows) => (rows.every((n) => n % 10 === 0) ? undefined : 'shows another reason')),
    },
    {
      name: 'dlq: time window (one day)',
      path: `/dlq?since=${since}&until=${until}`,
      goalMs: BROKER_PAGE_GOAL_MS,
      wrong: dlqList((rows) => (rows.length === 100 ? undefined : `shows ${rows.length} rows, not 100`)),
    },
    {
      name: 'dlq: older page',
      path: older,
      goalMs: BROKER_PAGE_GOAL_MS,
      wrong: dlqList((rows) => (rows[0] === dlqRecords - 101 ? undefined : `starts at evt_dlq_${rows[0]}`)),
    },
    {
      name: 'dlq: one record',
      path: `/dlq/record?ref=${bigDlqRef(dlqRecords - 1)}`,
      goalMs: BROKER_PAGE_GOAL_MS,
      wrong: shows(`evt_dlq_${dlqRecords - 1}`),
    },
  ];
}

export interface PageVerdict {
  name: string;
  goalMs: number;
  medianMs: number;
  met: boolean;
}

/** Each page's median against its goal; a page with no timed round has not met it. */
export function verdicts(pages: readonly PageSpec[], times: Record<string, number[]>): PageVerdict[] {
  return pages.map((p) => {
    const medianMs = spread(times[p.name] ?? []).median;
    return { name: p.name, goalMs: p.goalMs, medianMs, met: Number.isFinite(medianMs) && medianMs <= p.goalMs };
  });
}
