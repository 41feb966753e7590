import { describe, expect, it } from 'vitest';
import { BROKER_PAGE_GOAL_MS, consolePages, dlqRecordsRead, olderLink, POSTGRES_PAGE_GOAL_MS, verdicts } from './pages.ts';

describe('bench:console pages', () => {
  const pages = consolePages(Date.parse('2026-12-01T00:00:00Z'), '/dlq?before=0:1');

  it('holds search to the Postgres goal and every other page to the broker goal', () => {
    for (const p of pages) expect(p.goalMs, p.name).toBe(p.path.startsWith('/search') ? POSTGRES_PAGE_GOAL_MS : BROKER_PAGE_GOAL_MS);
    expect(new Set(pages.map((p) => p.name)).size).toBe(pages.length);
  });

  it('judges the median of the rounds, at the goal still met', () => {
    const [overview] = pages;
    const judged = (values: number[]) => verdicts([overview!], { overview: values })[0]!;
    expect(judged([900, 5000, 1000])).toMatchObject({ medianMs: 1000, met: true });
    expect(judged([1001, 10, 2000])).toMatchObject({ medianMs: 1001, met: false });
    expect(judged([])).toMatchObject({ met: false });
  });

  it('reads the records read and the Older link off a list page', () => {
    const text = `(100000\n on <code>t.dlq</code>; 192 read for this page, more are older).<a href="/dlq?tenant=a&amp;before=0:10,1:9">Older</a>`;
    expect(dlqRecordsRead(text)).toBe(192);
    expect(olderLink(text)).toBe('/dlq?tenant=a&before=0:10,1:9');
    expect(dlqRecordsRead('<p>no count</p>')).toBeUndefined();
  });

  it('takes a wrong answer for one', () => {
    const newest = pages.find((p) => p.name === 'dlq: newest')!;
    expect(newest.wrong('<p class="problem">Unreachable</p>')).toMatch(/no count/);
    expect(newest.wrong('5 read for this page <tr data-event-id="evt_dlq_99999">')).toBeUndefined();
    expect(newest.wrong('5 read for this page <tr data-event-id="evt_dlq_5">')).toMatch(/starts at/);
  });
});
