import { describe, expect, it } from 'vitest';
import { escapeHtml, html, jsonForScript } from './html.ts';
import { answersByStatus } from './ingress-answers.ts';
import { diffSnapshots } from './diff.ts';
import { REDACTED, redactedBody, redactHeaders } from './redact.ts';
import { outcomeSeries, overviewPage } from './pages/overview.ts';
import { searchPage } from './pages/search.ts';
import type { Overview } from './readers.ts';

const ctx = { actionsEnabled: false, path: '/' };
const evil = '<script>alert(1)</script>"\'&`';

describe('HTML escaping', () => {
  it('escapes every interpolated value, nested templates pass through', () => {
    expect(escapeHtml(evil)).toBe('&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;&#96;');
    expect(html`<td title="${evil}">${[html`<b>${evil}</b>`, evil]}</td>`.text).not.toContain('<script>');
    expect(html`${null}${undefined}${false}${0}`.text).toBe('0');
  });

  it('JSON in a script block cannot close the element', () => {
    const text = jsonForScript({ s: '</script><!--' }).text;
    expect(text).not.toContain('<');
    expect(JSON.parse(text)).toEqual({ s: '</script><!--' });
  });

  it('a search page escapes the term and every row from the database', () => {
    const page = searchPage(ctx, evil, {
      ok: true,
      value: [
        {
          tenant_id: evil,
          event_id: evil,
          idempotency_key: evil,
          trace_id: evil,
          resource_type: 'theme',
          resource_id: evil,
          resource_version: '1',
          event_type: evil,
          status: evil,
          reason: null,
          received_at: new Date(),
          first_seen_at: new Date(),
          matched: 'event_id',
        },
      ],
    });
    expect(page).not.toContain('<script>alert');
    expect(page).toContain('&lt;script&gt;alert(1)');
  });
});

describe('overview', () => {
  it('counts per minute by outcome, zeros filled, statuses grouped', () => {
    const now = new Date('2026-01-01T00:10:30Z');
    const s = outcomeSeries(
      [
        { minute: new Date('2026-01-01T00:10:00Z'), status: 'applied', count: 3 },
        { minute: new Date('2026-01-01T00:09:00Z'), status: 'duplicate_version', count: 1 },
        { minute: new Date('2026-01-01T00:09:00Z'), status: 'duplicate', count: 2 },
        { minute: new Date('2026-01-01T00:00:00Z'), status: 'dead_lettered', count: 1 },
      ],
      10,
      now,
    );
    expect(s.minutes).toHaveLength(11);
    expect(s.series.applied!.at(-1)).toBe(3);
    expect(s.series.duplicate!.at(-2)).toBe(3);
    expect(s.series['dead-lettered']![0]).toBe(1);
  });

  it('says which source is unreachable instead of failing', () => {
    const down = { ok: false as const, problem: 'Postgres: connect ECONNREFUSED 127.0.0.1:5432' };
    const data: Overview = { minutes: 60, perMinute: down, totals: down, ingress: down, lag: down, outbox: down, retries: down };
    const page = overviewPage(ctx, data);
    expect(page).toContain('Unreachable — Postgres: connect ECONNREFUSED 127.0.0.1:5432');
    expect(page.match(/role="alert"/g)).toHaveLength(1);
  });
});

describe('dead-letter display', () => {
  it('never shows secrets in headers or body', () => {
    expect(redactHeaders({ 'x-webhook-signature': 'v1=abc', authorization: 'Bearer x', 'event-id': 'evt_1' })).toEqual({
      'x-webhook-signature': REDACTED,
      authorization: REDACTED,
      'event-id': 'evt_1',
    });
    const body = redactedBody(Buffer.from(JSON.stringify({ data: { api_key: 'k', nested: [{ client_secret: 's' }], name: 'n' } })));
    expect(body).not.toContain('"k"');
    expect(body).not.toContain('"s"');
    expect(body).toContain('"n"');
    expect(redactedBody(Buffer.from('token=abc'))).toBe('(not JSON: 9 bytes, not shown)');
  });
});

describe('ingress answers', () => {
  it('sums webhook_requests_total by status', () => {
    const text = [
      '# TYPE webhook_requests_total counter',
      'webhook_requests_total{source="demo",event_type="theme.updated",status="202"} 3',
      'webhook_requests_total{source="other",event_type="theme.updated",status="202"} 2',
      'webhook_requests_total{source="demo",event_type="",status="401"} 1',
      'webhook_signature_failures_total{source="demo",reason="bad"} 1',
    ].join('\n');
    expect(answersByStatus(text)).toEqual({ '202': 5, '401': 1 });
  });
});

describe('snapshot diff', () => {
  it('lists added, removed and changed leaves', () => {
    expect(diffSnapshots({ a: 1, b: { c: 2 }, l: [1] }, { a: 1, b: { c: 3 }, d: true })).toEqual([
      { path: 'b.c', kind: 'changed', before: '2', after: '3' },
      { path: 'd', kind: 'added', after: 'true' },
      { path: 'l[0]', kind: 'removed', before: '1' },
    ]);
  });
});
