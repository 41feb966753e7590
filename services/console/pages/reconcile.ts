// The resource page's Reconcile: a dry-run preview (what the provider's API answered and what
// would happen), then "reconcile now". The same on-demand reconciler as `bridge reconcile`.
import type { ReconcileReport } from '#domain/reconcile/index.ts';
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
  stale: "the provider's version is not above the stored one: nothing is sent",
  gone: 'the API says the resource no longer exists: a tombstone one version above the stored one (nothing sent if none is stored or it already is one)',
  failed: 'the API could not be reached or refused the request: nothing is sent',
  circuit_open: "the source's breaker is open after failures in a row: no request went out",
  invalid: 'the snapshot fails the event contract: nothing is sent',
};

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
        ${report.fetched ? html`GET <code>${report.fetched.url}</code> → ${report.fetched.status}${report.fetched.version === undefined ? '' : `, version ${report.fetched.version}`}` : 'nothing fetched'}
        (${report.attempts} attempt(s))
      </dd>
      <dt>stored now</dt>
      <dd>
        ${report.storedVersion === null ? 'nothing stored' : `version ${report.storedVersion}${report.storedDeleted ? ' (tombstone)' : ''}`}
      </dd>
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
                ${verb} <code>${event.event_id}</code> (${event.event_type}, version ${event.resource.version}) from <code>reconcile</code>,
                trigger <code>${report.trigger}</code>
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
