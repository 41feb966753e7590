import { html, jsonForScript, query } from '../html.ts';
import type { Overview } from '../readers.ts';
import { iso, page, problems, type PageContext } from './layout.ts';

/** The outcomes charted, and the inbox statuses each one counts. */
export const OUTCOMES = [
  { name: 'applied', statuses: ['applied'] },
  { name: 'duplicate', statuses: ['duplicate', 'duplicate_version'] },
  { name: 'stale', statuses: ['stale'] },
  // Counted from the anomaly rows (shared/domain/store/operator-views.ts).
  { name: 'quarantined', statuses: ['quarantined'] },
  { name: 'retrying', statuses: ['retrying'] },
  { name: 'dead-lettered', statuses: ['dead_lettered'] },
] as const;

/** Per outcome, one count per minute of the window (oldest first), zeros included. */
export function outcomeSeries(
  rows: ReadonlyArray<{ minute: Date; status: string; count: number }>,
  minutes: number,
  now: Date,
): { minutes: number[]; series: Record<string, number[]> } {
  const end = Math.floor(now.getTime() / 60_000) * 60_000;
  const starts = Array.from({ length: minutes + 1 }, (_, i) => end - (minutes - i) * 60_000);
  const index = new Map(starts.map((t, i) => [t, i]));
  const series: Record<string, number[]> = {};
  for (const o of OUTCOMES) series[o.name] = starts.map(() => 0);
  for (const row of rows) {
    const i = index.get(new Date(row.minute).getTime());
    const outcome = OUTCOMES.find((o) => (o.statuses as readonly string[]).includes(row.status));
    if (i !== undefined && outcome) series[outcome.name]![i]! += row.count;
  }
  return { minutes: starts.map((t) => t / 1000), series };
}

export function overviewPage(ctx: PageContext, data: Overview, now = new Date()): string {
  const totals = data.totals.ok ? new Map(data.totals.value.map((r) => [r.status, r.count])) : undefined;
  const chart = data.perMinute.ok ? outcomeSeries(data.perMinute.value, data.minutes, now) : undefined;
  const windowTotals = chart ? Object.fromEntries(Object.entries(chart.series).map(([k, v]) => [k, v.reduce((a, b) => a + b, 0)])) : {};
  const body = html` ${problems([
      data.totals.ok ? undefined : data.totals.problem,
      data.perMinute.ok ? undefined : data.perMinute.problem,
      data.lag.ok ? undefined : data.lag.problem,
      data.ingress.ok ? undefined : data.ingress.problem,
    ])}
    <section aria-labelledby="outcomes-h">
      <h2 id="outcomes-h">Events by outcome</h2>
      <table class="numbers" data-testid="outcome-totals">
        <thead>
          <tr>
            <th scope="col">outcome</th>
            <th scope="col">inbox statuses</th>
            <th scope="col">last 24 h</th>
            <th scope="col">last ${data.minutes} min</th>
          </tr>
        </thead>
        <tbody>
          ${OUTCOMES.map(
            (o) =>
              html`<tr>
                <th scope="row">${o.name}</th>
                <td>${o.statuses.join(', ')}</td>
                <td data-outcome="${o.name}">${totals ? o.statuses.reduce((n, s) => n + (totals.get(s) ?? 0), 0) : '—'}</td>
                <td data-outcome-window="${o.name}">${chart ? windowTotals[o.name] : '—'}</td>
              </tr>`,
          )}
          <tr>
            <th scope="row">received (not settled)</th>
            <td>received</td>
            <td data-outcome="received">${totals ? (totals.get('received') ?? 0) : '—'}</td>
            <td></td>
          </tr>
        </tbody>
      </table>
      ${
        chart
          ? html`<p class="muted">Events received per minute over the last ${data.minutes} minutes, by their outcome now.</p>
              <div class="charts" id="outcome-charts"></div>
              <script type="application/json" id="chart-data">
                ${jsonForScript(chart)}
              </script>`
          : ''
      }
    </section>
    <section aria-labelledby="ingress-h">
      <h2 id="ingress-h">Ingress answers by status code</h2>
      ${
        data.ingress.ok
          ? Object.keys(data.ingress.value).length === 0
            ? html`<p>No requests counted yet.</p>`
            : html`<table class="numbers" data-testid="ingress-answers">
                <thead>
                  <tr>
                    <th scope="col">status</th>
                    <th scope="col">answers since the ingress started</th>
                  </tr>
                </thead>
                <tbody>
                  ${Object.entries(data.ingress.value)
                    .sort(([a], [b]) => a.localeCompare(b))
                    .map(
                      ([status, n]) =>
                        html`<tr>
                          <th scope="row">${status}</th>
                          <td data-status="${status}">${n}</td>
                        </tr>`,
                    )}
                </tbody>
              </table>`
          : html`<p class="muted">Not available (the ingress's admin port does not answer).</p>`
      }
    </section>
    <section aria-labelledby="lag-h">
      <h2 id="lag-h">Consumer lag per partition</h2>
      ${
        data.lag.ok
          ? html`<table class="numbers" data-testid="lag">
              <thead>
                <tr>
                  <th scope="col">topic</th>
                  <th scope="col">partition</th>
                  <th scope="col">committed</th>
                  <th scope="col">end</th>
                  <th scope="col">lag</th>
                </tr>
              </thead>
              <tbody>
                ${data.lag.value.map(
                  (r) =>
                    html`<tr>
                      <td>${r.topic}</td>
                      <td>${r.partition}</td>
                      <td>${r.committed ?? '—'}</td>
                      <td>${r.end}</td>
                      <td>${r.lag}</td>
                    </tr>`,
                )}
              </tbody>
              <tfoot>
                <tr>
                  <th scope="row" colspan="4">total</th>
                  <td data-testid="total-lag">${data.lag.value.reduce((n, r) => n + r.lag, 0)}</td>
                </tr>
              </tfoot>
            </table>`
          : html`<p class="muted">Not available.</p>`
      }
    </section>
    <section aria-labelledby="outbox-h">
      <h2 id="outbox-h">Outbox</h2>
      ${
        data.outbox.ok
          ? html`<p data-testid="outbox">
              <span data-testid="outbox-unpublished">${data.outbox.value.unpublished}</span> applied record(s) not yet published; the oldest
              waits <span data-testid="outbox-age">${data.outbox.value.oldestAgeSeconds.toFixed(1)}</span> s.
            </p>`
          : html`<p class="muted">Not available.</p>`
      }
    </section>
    <section aria-labelledby="retry-h">
      <h2 id="retry-h">Retry topics</h2>
      ${
        data.retries.ok
          ? html`<table class="numbers" data-testid="retries">
              <thead>
                <tr>
                  <th scope="col">level</th>
                  <th scope="col">topic</th>
                  <th scope="col">waiting</th>
                  <th scope="col">next due</th>
                </tr>
              </thead>
              <tbody>
                ${data.retries.value.map(
                  (r) =>
                    html`<tr>
                      <td>${r.level}</td>
                      <td>${r.topic}</td>
                      <td data-retry-level="${r.level}">${r.waiting}</td>
                      <td>${r.nextDueAt ? html`<time datetime="${iso(r.nextDueAt)}">${iso(r.nextDueAt)}</time>` : '—'}</td>
                    </tr>`,
                )}
              </tbody>
            </table>`
          : html`<p class="muted">Not available.</p>`
      }
      <p><a href="/dlq${query({})}">Dead letters →</a></p>
    </section>`;
  return page('Overview', ctx, body);
}
