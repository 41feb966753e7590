// The resource page's Reconcile: a dry-run preview (what the provider's API answered and what
// would happen), then "reconcile now". The same on-demand reconciler as `bridge reconcile`.
import type { ReconcileReport } from '#domain/reconcile/index.ts';
import type { ReconcilePullRow } from '#domain/store/reconcile-pulls.ts';
import { html, query, type SafeHtml } from '../html.ts';
import { redactJson } from '../redact.ts';
import { page, type PageContext } from './layout.ts';

/** Whether the resource page may offer Reconcile for a tenant and type, and if not, why. */
export type ReconcileAvailability = { ok: true; sources: string[] } | { ok: false; why: string };

export interface ReconcileTarget {
  tenant: string;
  type: string;
  id: string;
  source?: string | undefined;
}

/** What the worker made of the published event, once it settled (or not, within the wait). */
export type ReconcileSettled = { status: string; reason: string | null } | { status: 'timeout'; reason: string };

const OUTCOME_MEANING: Record<string, string> = {
  applied: 'a newer snapshot: it goes to the events topic and the worker applies it like a webhook',
  stale:
    "the provider's version is not above the stored one (on a type ordered by occurred_at: its time is not after the stored time): nothing is sent",
  gone: "the API answered 404/410 without a version: nothing is sent (the bridge never deletes at a version it made up); the provider's own delete event, or a 410 stating the deletion's version, is what deletes",
  failed: 'the API could not be reached or refused the request: nothing is sent',
  circuit_open: "the source's breaker is open after failures in a row: no request went out",
  invalid:
    "the answer is about another tenant, type or id than asked, fails the event contract or the source's strict schema, or states no time on a type ordered by occurred_at: nothing is sent",
  implausible:
    "the provider's version leads the highest known one (0 for a resource never seen) by more than the source's maxVersionLead, or its time is further ahead of this clock than the source's maxFutureSkewSeconds: nothing is sent",
};

const PULL_STATUS_MEANING: Record<string, string> = {
  pending: 'owed: queued, or its worker stopped before an answer (pulled again when due)',
  retrying: "failed for now: pulled again when due, on the retry chain's schedule",
  gone: 'the API answered 404/410 without a version: nothing was changed; look at the resource, and reconcile once the API has it',
  failed: 'the answer was refused, or retries ran out: nothing was changed; reconcile by hand once the cause is fixed',
};

/** The stored state as the pull compared it: its version, and its time when ordered by occurred_at. */
function storedText(report: ReconcileReport): string {
  const at = report.ordering === 'occurred_at' && report.storedOccurredAt ? ` at ${report.storedOccurredAt}` : '';
  if (report.storedVersion === null && at === '') return 'nothing stored';
  const version = report.storedVersion === null ? 'no version' : `version ${report.storedVersion}`;
  return `${version}${at}${report.storedDeleted ? ' (tombstone)' : ''}${report.ordering === undefined ? '' : ` (ordered by ${report.ordering})`}`;
}

function targetHidden(t: ReconcileTarget, ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="csrf" value="${ctx.csrf ?? ''}" /> <input type="hidden" name="tenant" value="${t.tenant}" /><input
      type="hidden"
      name="type"
      value="${t.type}"
    />
    <input type="hidden" name="id" value="${t.id}" />`;
}

/** The Reconcile section of the resource page: a preview button, or why there is none. */
export function reconcileSection(ctx: PageContext, t: ReconcileTarget, availability: ReconcileAvailability): SafeHtml {
  let content: SafeHtml;
  if (!availability.ok) {
    content = html`<p class="muted" data-testid="reconcile-unavailable">No Reconcile here: ${availability.why}</p>`;
  } else if (!ctx.actionsEnabled) {
    content = html`<p class="muted" data-testid="reconcile-unavailable">Reconcile is disabled: no CONSOLE_OPERATOR_TOKEN configured.</p>`;
  } else if (!ctx.operator) {
    const next = '/resource';
    content = html`<p class="muted" data-testid="reconcile-unavailable"><a href="/sign-in${query({ next })}">Sign in</a> to reconcile.</p>`;
  } else {
    const several = availability.sources.length > 1;
    content = html`<form method="post" action="/resource/reconcile" class="fields" data-testid="reconcile-form">
      ${targetHidden(t, ctx)}
      ${
        several
          ? html`<label
              >source
              <select name="source">
                ${availability.sources.map((s) => html`<option>${s}</option>`)}
              </select></label
            >`
          : html`<input type="hidden" name="source" value="${availability.sources[0]}" />`
      }
      <button type="submit">Preview reconcile</button>
    </form>`;
  }
  return html`<section aria-labelledby="reconcile-h">
    <h2 id="reconcile-h">Reconcile from the provider's API</h2>
    <p>
      Pulls the resource's current snapshot from the API of the source that owns it and, when it is newer than the state, publishes it to
      the events topic as an event from <code>reconcile</code> (trigger <code>operator</code>): the worker applies it like a webhook.
      <a href="/reconcile${query({ tenant: t.tenant, type: t.type, id: t.id })}">Pulls the worker owes or could not complete</a>.
    </p>
    ${content}
  </section>`;
}

function reportFacts(report: ReconcileReport, dryRun: boolean): SafeHtml {
  const verb = dryRun ? 'would publish' : 'published';
  const event = report.event;
  return html`<dl class="facts" data-testid="reconcile-report">
      <dt>resource</dt>
      <dd><code>${report.resourceKey}</code></dd>
      <dt>source</dt>
      <dd>${report.source}</dd>
      <dt>fetched</dt>
      <dd data-testid="reconcile-fetched">
        ${report.fetched ? html`GET <code>${report.fetched.url}</code> → ${report.fetched.status}${report.fetched.version === undefined ? '' : `, version ${report.fetched.version}`}${report.fetched.occurredAt === undefined ? '' : `, time ${report.fetched.occurredAt}`}` : 'nothing fetched'}
        (${report.attempts} attempt(s))
      </dd>
      <dt>stored now</dt>
      <dd>${storedText(report)}</dd>
      <dt>outcome</dt>
      <dd><strong data-testid="reconcile-outcome">${report.outcome}</strong>: ${OUTCOME_MEANING[report.outcome] ?? ''}</dd>
      ${
        report.reason
          ? html`<dt>reason</dt>
              <dd>${report.reason}</dd>`
          : ''
      }
      ${
        event
          ? html`<dt>event</dt>
              <dd data-testid="reconcile-event">
                ${verb} <code>${event.event_id}</code> (${event.event_type},
                ${report.ordering === 'occurred_at' ? `occurred_at ${event.occurred_at}` : `version ${event.resource.version}`}) from
                <code>reconcile</code>, trigger <code>${report.trigger}</code>
              </dd>`
          : ''
      }
    </dl>
    ${
      report.fetched?.data !== undefined
        ? html`<h2>Fetched data</h2>
            <pre tabindex="0" data-testid="reconcile-data">${JSON.stringify(redactJson(report.fetched.data), null, 2)}</pre>`
        : ''
    }`;
}

const backLink = (t: ReconcileTarget) =>
  html`<a href="/resource${query({ tenant: t.tenant, type: t.type, id: t.id })}">Back to the resource</a>`;

export function reconcilePreviewPage(ctx: PageContext, t: ReconcileTarget, report: ReconcileReport): string {
  const wouldSend = report.event !== undefined && (report.outcome === 'applied' || report.outcome === 'gone');
  const body = html`<p role="status" data-testid="reconcile-summary">
      Dry run: the API was asked, nothing was published.
      ${wouldSend ? 'Reconcile now publishes the event below.' : 'Reconcile now would publish nothing.'}
    </p>
    ${reportFacts(report, true)}
    <form method="post" action="/resource/reconcile">
      ${targetHidden(t, ctx)}<input type="hidden" name="source" value="${report.source}" />
      <input type="hidden" name="confirm" value="yes" />
      <button type="submit">Reconcile now</button>
      ${backLink(t)}
    </form>
    <p class="muted">Reconcile now asks the API again: what it answers then is what is published.</p>`;
  return page(`Reconcile: preview`, ctx, body);
}

export function reconcileResultPage(
  ctx: PageContext,
  t: ReconcileTarget,
  report: ReconcileReport,
  settled: ReconcileSettled | undefined,
): string {
  const body = html`<p role="status" data-testid="reconcile-summary">
      ${report.published ? html`Published to the events topic.` : html`Nothing published.`}
      ${settled ? html`The worker's outcome: <strong data-testid="reconcile-settled">${settled.status}</strong>${settled.reason ? ` (${settled.reason})` : ''}.` : ''}
    </p>
    ${reportFacts(report, false)}
    <p>${backLink(t)}</p>`;
  return page(`Reconcile: outcome`, ctx, body);
}

const when = (d: Date | null) => (d === null ? '' : d.toISOString());

/** The pulls recorded in reconcile_pulls: owed (pending, retrying) and waiting for an operator (gone, failed). */
export function reconcilePullsPage(ctx: PageContext, rows: readonly ReconcilePullRow[], filtered: boolean): string {
  const body = html`<p>
      Pulls the worker owes or could not complete (newest first). <code>pending</code> and <code>retrying</code> are pulled again when due,
      also after a restart; <code>gone</code> and <code>failed</code> wait for an operator: a reconcile that applies (or finds the state
      current) clears them. ${filtered ? html`<a href="/reconcile">All resources</a>` : ''}
    </p>
    ${
      rows.length === 0
        ? html`<p class="muted" data-testid="reconcile-pulls-empty">No pull is owed or waiting.</p>`
        : html`<table data-testid="reconcile-pulls">
            <thead>
              <tr>
                <th>resource</th>
                <th>source</th>
                <th>trigger</th>
                <th>status</th>
                <th>attempts</th>
                <th>last answer</th>
                <th>next attempt</th>
                <th>updated</th>
              </tr>
            </thead>
            <tbody>
              ${rows.map(
                (r) =>
                  html`<tr>
                    <td>
                      <a href="/resource${query({ tenant: r.tenant_id, type: r.resource_type, id: r.resource_id })}"
                        ><code>${r.tenant_id}/${r.resource_type}/${r.resource_id}</code></a
                      >
                    </td>
                    <td>${r.source}</td>
                    <td>${r.trigger}${r.seen_version === null ? '' : ` (seen v${r.seen_version})`}</td>
                    <td title="${PULL_STATUS_MEANING[r.status] ?? ''}"><strong data-testid="reconcile-pull-status">${r.status}</strong></td>
                    <td>${String(r.attempts)}</td>
                    <td>
                      ${r.last_outcome ?? ''}${r.last_status === null ? '' : ` (HTTP ${r.last_status})`}${r.last_reason ? `: ${r.last_reason}` : ''}
                    </td>
                    <td>${when(r.next_attempt_at)}</td>
                    <td>${when(r.updated_at)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }`;
  return page('Reconcile: pulls owed and failed', ctx, body);
}
