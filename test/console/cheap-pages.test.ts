import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '#plumbing/logging/logger.ts';
import { startConsole, type ConsoleHandle } from '#services/console/console.ts';
import { DLQ_PAGE } from '#services/console/readers.ts';
import { useTestDatabase } from '../kit/db.ts';
import { searchInbox, selectOutcomesPerMinute, selectStatusCounts } from '#domain/store/operator-views.ts';
import type { Queryable } from '#domain/store/session.ts';
import { testKafka, useTestTopics } from '../kit/kafka.ts';
import { BIG_BRIDGE, bigDlqRef, fillBigDlq, fillBigInbox } from '../kit/big-bridge.ts';
import { consoleTestConfig } from '../kit/console.ts';

// Operator pages on a big bridge (test/kit/big-bridge.ts): a million inbox rows and a
// 100,000-record DLQ. Asserted is what keeps a page cheap whatever the data's size: the overview's
// and search's statements reach inbox_events through indexes, never a sequential scan, and each
// dead-letter page reads at most its scan budget (DLQ_PAGE) of records from the broker, about one
// page's worth where the newest records read already fill it; and that every page shows the right
// records. How fast the pages answer is the machine's as much as the bridge's, so no time is
// asserted here: `npm run bench:console` times them against their goals. A page that never answers
// fails on its test's timeout, a liveness bound only: each sits 10x or more above its test's
// duration on a quiet machine (the pages' times: bench/results/console.json), as does the fill's.
const { inboxRows: INBOX_ROWS, dlqRecords: DLQ_RECORDS, partitions: PARTITIONS, tenants: TENANTS } = BIG_BRIDGE;
const DAY_MS = 24 * 3600 * 1000;

/** What a dead-letter page shows: its rows (dead letter i of the fill), its count line and its Older link. */
interface DlqPageRead {
  rows: number[];
  /** Records read from the broker for this page ("N read for this page"). */
  scanned: number;
  /** Records on the topic, as the page counts them. */
  total: number;
  older: string | undefined;
  text: string;
}

describe(`operator pages on ${INBOX_ROWS} inbox rows and a ${DLQ_RECORDS}-record DLQ`, () => {
  const db = useTestDatabase();
  const kafka = testKafka();
  const { names } = useTestTopics(kafka, { eventsPartitions: PARTITIONS });
  let consoleHandle: ConsoleHandle;
  let stamps: number[];
  const now = Date.now();
  const reads: Record<string, number> = {};

  beforeAll(async () => {
    const t0 = performance.now();
    [stamps] = await Promise.all([fillBigDlq(kafka, names, now), fillBigInbox(db.url)]);
    console.log(`[cheap-pages] data generated in ${Math.round(performance.now() - t0)} ms`);
    // Each generated record once: the counts the tests compare with are taken from `stamps`.
    const admin = kafka.admin();
    await admin.connect();
    try {
      const offsets = await admin.fetchTopicOffsets(names.dlq);
      expect(offsets.reduce((n, o) => n + Number(o.high) - Number(o.low), 0)).toBe(DLQ_RECORDS);
    } finally {
      await admin.disconnect();
    }
    const config = consoleTestConfig({ databaseUrl: db.url, names, group: 'cheap-pages-no-group' });
    consoleHandle = await startConsole(config, { logger: createLogger({ name: 'console-cheap', level: 'silent' }), env: {} });
  }, 600_000);

  afterAll(async () => {
    console.log(`[cheap-pages] records read per dead-letter page (budget ${DLQ_PAGE.scanBudget}): ${JSON.stringify(reads)}`);
    await consoleHandle?.close();
  });

  const page = async (path: string): Promise<string> => {
    const answer = await fetch(consoleHandle.url + path);
    const text = await answer.text();
    expect(answer.status, path).toBe(200);
    return text;
  };

  /** A dead-letter list page, read whole; every one of them is held to the scan budget. */
  const dlqPage = async (name: string, path: string): Promise<DlqPageRead> => {
    const text = await page(path);
    const count = /in the time window \((\d+)\s+on <code>[^<]*<\/code>; (\d+) read for this page/.exec(text);
    expect(count, `${name}: the page's count line`).not.toBeNull();
    const read: DlqPageRead = {
      rows: [...text.matchAll(/data-event-id="evt_dlq_(\d+)"/g)].map((m) => Number(m[1])),
      total: Number(count![1]),
      scanned: Number(count![2]),
      older: /href="(\/dlq\?[^"]*before=[^"]*)"/.exec(text.replaceAll('&amp;', '&'))?.[1],
      text,
    };
    reads[name] = read.scanned;
    // The page knows the DLQ's size, and reads no more than its budget of it.
    expect(read.total, name).toBe(DLQ_RECORDS);
    expect(read.scanned, name).toBeGreaterThan(0);
    expect(read.scanned, name).toBeLessThanOrEqual(DLQ_PAGE.scanBudget);
    return read;
  };

  /** The newest records read fill a page: fewer than two pages' worth read, not the budget. */
  const aboutOnePage = (name: string, read: DlqPageRead) => {
    expect(read.rows.length, name).toBe(DLQ_PAGE.limit);
    expect(read.scanned, name).toBeGreaterThanOrEqual(DLQ_PAGE.limit);
    expect(read.scanned, name).toBeLessThan(2 * DLQ_PAGE.limit);
  };

  it('the overview counts by a time window', async () => {
    const text = await page('/');
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM inbox_events WHERE status = 'applied' AND received_at >= now() - interval '24 hours'`,
    );
    // The page's count and the query's differ only by rows that crossed the window's edge since.
    const shown = Number(/data-outcome="applied">(\d+)</.exec(text)![1]);
    expect(Math.abs(shown - rows[0]!.n)).toBeLessThan(10);
  }, 60_000);

  it('the overview and search read inbox_events through indexes, never a scan of it', async () => {
    // The statements the pages run, explained instead of run.
    const plans: Array<{ name: string; scans: string[] }> = [];
    const scansOf = (node: Record<string, unknown>): string[] => [
      ...(node['Relation Name'] ? [`${String(node['Node Type'])} on ${String(node['Relation Name'])}`] : []),
      ...((node.Plans as Array<Record<string, unknown>> | undefined) ?? []).flatMap(scansOf),
    ];
    const explaining = (name: string): Queryable =>
      ({
        query: async (q: { text: string; values?: unknown[] }) => {
          const { rows } = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, unknown> }> }>({
            text: `EXPLAIN (FORMAT JSON) ${q.text}`,
            values: q.values ?? [],
          });
          plans.push({ name, scans: scansOf(rows[0]!['QUERY PLAN'][0]!.Plan) });
          return { rows: [] };
        },
      }) as unknown as Queryable;
    await selectOutcomesPerMinute(explaining('per minute'), 60);
    await selectStatusCounts(explaining('counts'), 24);
    for (const term of ['evt_big_1', 'idem_big_1', '00000000000000000000000000000002', 'tenant_big_1/theme/thm_big_1', 'thm_big_1'])
      await searchInbox(explaining(`search ${term}`), term, 100);
    expect(plans.length).toBe(7);
    for (const { name, scans } of plans) {
      expect(scans.filter((s) => s.endsWith(' on inbox_events')).length, name).toBeGreaterThan(0);
      expect(scans, name).not.toContain('Seq Scan on inbox_events');
    }
  });

  it('search by event id, idempotency key, trace id and resource', async () => {
    const i = 424_242;
    expect(await page(`/search?q=evt_big_${i}`)).toContain(`evt_big_${i}<`);
    expect(await page(`/search?q=idem_big_${i}`)).toContain(`evt_big_${i}<`);
    const byTrace = await page(`/search?q=${i.toString(16).padStart(32, '0')}`);
    expect(byTrace).toContain(`evt_big_${i}<`);
    expect(byTrace).toContain('trace_id');
    expect(await page(`/search?q=tenant_big_${i % TENANTS}/theme/thm_big_${i % 100000}`)).toContain(`evt_big_${i}<`);
    expect(await page(`/search?q=thm_big_${i % 100000}`)).toContain(`evt_big_${i}<`);
  }, 60_000);

  it('dead letters: each page reads at most its scan budget of a DLQ many budgets long, and shows the right records', async () => {
    // Only a DLQ far longer than the budget shows that a page's reads do not grow with it.
    expect(DLQ_RECORDS).toBeGreaterThan(10 * DLQ_PAGE.scanBudget);

    const newest = await dlqPage('newest', '/dlq');
    aboutOnePage('newest', newest);
    expect(newest.rows.slice(0, 5)).toEqual([DLQ_RECORDS - 1, DLQ_RECORDS - 2, DLQ_RECORDS - 3, DLQ_RECORDS - 4, DLQ_RECORDS - 5]);

    // One record in TENANTS is the tenant's: a page of them would take 5,000 reads, so the page
    // spends its budget (to the whole record per partition), shows what it found and links to older.
    const byTenant = await dlqPage('tenant', '/dlq?tenant=tenant_dlq_7');
    expect(byTenant.rows.length).toBeGreaterThan(0);
    expect(byTenant.rows.length).toBeLessThan(DLQ_PAGE.limit);
    expect(byTenant.rows.every((n) => n % TENANTS === 7)).toBe(true);
    expect(byTenant.rows[0]).toBe(DLQ_RECORDS - 1 - ((DLQ_RECORDS - 1 - 7) % TENANTS));
    expect(byTenant.scanned).toBeGreaterThan(DLQ_PAGE.scanBudget - PARTITIONS);
    expect(byTenant.older).toBeDefined();

    const byReason = await dlqPage('reason', '/dlq?reason=invalid_envelope');
    expect(byReason.rows.length).toBe(DLQ_PAGE.limit);
    expect(byReason.rows.every((n) => n % 10 === 0)).toBe(true);

    // A day in the middle of the DLQ, from the broker's time index.
    const since = new Date(now - 15 * DAY_MS).toISOString();
    const until = new Date(now - 14 * DAY_MS).toISOString();
    const day = await dlqPage('time window', `/dlq?since=${since}&until=${until}`);
    aboutOnePage('time window', day);
    expect(day.rows.every((n) => stamps[n]! >= Date.parse(since) && stamps[n]! <= Date.parse(until))).toBe(true);
    expect(Math.max(...day.rows)).toBe(stamps.findLastIndex((s) => s <= Date.parse(until)));

    // The Older link continues exactly where the page ended, at the same cost.
    expect(newest.older).toBeDefined();
    const older = await dlqPage('older', newest.older!);
    aboutOnePage('older', older);
    expect(older.rows[0]).toBe(DLQ_RECORDS - 101);

    expect(await page(`/dlq/record?ref=${bigDlqRef(DLQ_RECORDS - 1)}`)).toContain(`evt_dlq_${DLQ_RECORDS - 1}`);
  }, 120_000);

  it('warns before dead letters expire: on the pages and in a metric', async () => {
    // Retention 30 days, warning 7 days before: records written more than 23 days ago.
    const expiring = (at: number) => stamps.filter((s) => s < at - 23 * DAY_MS).length;
    // The broker finds the first record at or after a timestamp exactly (it reads the batch the time
    // index points into), so the count is exact for the moment the page was built: a record crosses
    // the line every 25 s, hence the count at the request's start and at its end bound it.
    const before = Date.now();
    const list = await page('/dlq');
    const after = Date.now();
    const shown = Number(/data-testid="dlq-expiry">\s*<strong>(\d+)<\/strong>/.exec(list)?.[1]);
    console.log(`[cheap-pages] expiring: page ${shown}, generated ${expiring(before)} to ${expiring(after)}`);
    expect(shown).toBeGreaterThanOrEqual(expiring(before));
    expect(shown).toBeLessThanOrEqual(expiring(after));
    expect(shown).toBeGreaterThan(20_000);

    // The oldest record's page says when it may be deleted; the newest's says nothing.
    const oldest = await page('/dlq/record?ref=0:0');
    expect(oldest).toContain('data-testid="record-expiry"');
    expect(/data-testid="expires">([^<]+)</.exec(oldest)?.[1]).toBe(new Date(stamps[0]! + 30 * DAY_MS).toISOString());
    expect(await page(`/dlq/record?ref=${bigDlqRef(DLQ_RECORDS - 1)}`)).not.toContain('data-testid="record-expiry"');

    const scraped = Date.now();
    const metrics = await (await fetch(`${consoleHandle.url}/metrics`)).text();
    const gauge = Number(/^dead_letter_expiring_records (\S+)$/m.exec(metrics)?.[1]);
    expect(gauge).toBeGreaterThanOrEqual(expiring(scraped));
    expect(gauge).toBeLessThanOrEqual(expiring(Date.now()));
    expect(metrics).toMatch(/^dead_letter_retention_seconds 2592000$/m);
  }, 60_000);
});
