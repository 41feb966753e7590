import { deadLetteredAt, entryReason, headersAsText, inboxKeyOf, type DlqEntry } from '#domain/operations/dlq-records.ts';
import type { InboxStatus, ReplayOutcome, ReplayPlanRow } from '#domain/operations/dlq-replay/index.ts';
import { html, query, type SafeHtml } from '../html.ts';
import { entrySource, type DlqFilterInput, type DlqView, type Part } from '../readers.ts';
import { formatCursor, type DlqExpiry } from '#domain/operations/dlq-window.ts';
import { redactedBody, redactHeaders } from '../redact.ts';
import { page, problems, type PageContext } from './layout.ts';

export interface DlqFilterText {
  reason?: string | undefined;
  source?: string | undefined;
  tenant?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
}

/** ISO times with an offset (as the CLI takes them); undefined when absent; an error text when unreadable. */
export function parseFilter(text: DlqFilterText): { filter: DlqFilterInput; error?: string } {
  const filter: DlqFilterInput = {};
  if (text.reason) filter.reason = text.reason;
  if (text.source) filter.source = text.source;
  if (text.tenant) filter.tenant = text.tenant;
  for (const name of ['since', 'until'] as const) {
    const value = text[name];
    if (!value) continue;
    const ms = Date.parse(value);
    if (!Number.isFinite(ms)) return { filter, error: `${name} must be an ISO time such as 2026-01-31T00:00:00Z` };
    filter[name] = ms;
  }
  return { filter };
}

const ref = (e: DlqEntry) => `${e.partition}:${e.offset}`;

function statusOf(statuses: Map<string, InboxStatus> | undefined, e: DlqEntry): string {
  const key = inboxKeyOf(e);
  return (key && statuses?.get(key)?.status) || '';
}

function actionHidden(ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="csrf" value="${ctx.csrf ?? ''}" />`;
}

function replayNote(ctx: PageContext): SafeHtml {
  if (!ctx.actionsEnabled) return html`<p class="muted">Replay is disabled: no CONSOLE_OPERATOR_TOKEN configured.</p>`;
  if (!ctx.operator) return html`<p class="muted"><a href="/sign-in?next=/dlq">Sign in</a> to replay.</p>`;
  return html``;
}

/** When the broker may delete this record (retention counts from the record's timestamp). */
function expiresAt(e: DlqEntry, expiry: DlqExpiry | undefined): number | undefined {
  return expiry?.retentionMs === undefined ? undefined : e.timestamp + expiry.retentionMs;
}

function expiringSoon(e: DlqEntry, expiry: DlqExpiry | undefined): boolean {
  const at = expiresAt(e, expiry);
  return at !== undefined && expiry !== undefined && at - Date.now() <= expiry.warnMs;
}

const days = (ms: number) => `${Math.round((ms / 86_400_000) * 10) / 10} days`;

/** The warning that dead letters are about to become unreplayable; nothing when none are. */
export function expiryWarning(expiry: Part<DlqExpiry>): SafeHtml {
  if (!expiry.ok || expiry.value.retentionMs === undefined || expiry.value.expiring === 0) return html``;
  const e = expiry.value;
  return html`<p class="problem" role="alert" data-testid="dlq-expiry">
    <strong>${e.expiring}</strong> dead letter(s) were written before ${new Date(e.writtenBefore!).toISOString()}: the broker deletes them
    once they are ${days(e.retentionMs!)} old (the topic's retention.ms), within ${days(e.warnMs)} or sooner, and a deleted dead letter can
    no longer be replayed. Replay what you need first (<a href="/dlq${query({ until: new Date(e.writtenBefore!).toISOString() })}"
      >show them</a
    >).
  </p>`;
}

export function dlqListPage(
  ctx: PageContext,
  filterText: DlqFilterText,
  view: DlqView | undefined,
  topic: string,
  filterError?: string,
): string {
  const window = view?.window.ok ? view.window.value : undefined;
  const statuses = view?.statuses.ok ? view.statuses.value : undefined;
  const expiry = view?.expiry.ok ? view.expiry.value : undefined;
  const selected = window?.entries ?? [];
  const reasons = [...new Set(selected.map(entryReason))].sort();
  const canAct = ctx.actionsEnabled && ctx.operator !== undefined;
  const older = window?.next ? `/dlq${query({ ...filterText, before: formatCursor(window.next) })}` : undefined;
  const body = html` ${problems([
      view && !view.window.ok ? view.window.problem : undefined,
      view && view.window.ok && !view.statuses.ok ? view.statuses.problem : undefined,
      view && !view.expiry.ok ? view.expiry.problem : undefined,
    ])}
    ${view ? expiryWarning(view.expiry) : ''} ${filterError ? html`<p class="problem" role="alert">${filterError}</p>` : ''}
    <form method="get" action="/dlq" class="fields" aria-label="Filter">
      <label>reason <input name="reason" list="dlq-reasons" value="${filterText.reason ?? ''}" /></label>
      <datalist id="dlq-reasons">${reasons.map((r) => html`<option value="${r}"></option>`)}</datalist>
      <label>source <input name="source" value="${filterText.source ?? ''}" /></label>
      <label>tenant <input name="tenant" value="${filterText.tenant ?? ''}" /></label>
      <label>since <input name="since" value="${filterText.since ?? ''}" placeholder="2026-01-31T00:00:00Z" /></label>
      <label>until <input name="until" value="${filterText.until ?? ''}" placeholder="2026-02-01T00:00:00Z" /></label>
      <button type="submit">Filter</button>
    </form>
    ${
      window
        ? html`<p data-testid="dlq-count">
            <strong>${selected.length}</strong> matching record(s), newest first, of ${window.inWindow} in the time window (${window.total}
            on <code>${topic}</code>; ${window.scanned} read for this page${window.next ? ', more are older' : ''}).
          </p>`
        : ''
    }
    ${replayNote(ctx)}
    <form method="post" action="/dlq/replay" id="replay-form">
      ${actionHidden(ctx)}
      ${Object.entries(filterText).map(([k, v]) => (v ? html`<input type="hidden" name="${`filter_${k}`}" value="${v}" />` : ''))}
      <div class="scroll" tabindex="0">
        <table data-testid="dlq-table">
          <thead>
            <tr>
              <th scope="col"><span class="visually-hidden">select</span></th>
              <th scope="col">dead-lettered</th>
              <th scope="col">record</th>
              <th scope="col">event id</th>
              <th scope="col">tenant</th>
              <th scope="col">source</th>
              <th scope="col">reason</th>
              <th scope="col">attempt</th>
              <th scope="col">inbox now</th>
            </tr>
          </thead>
          <tbody>
            ${selected.map(
              (e) =>
                html`<tr
                  data-ref="${ref(e)}"
                  data-event-id="${e.eventId ?? ''}"
                  ${expiringSoon(e, expiry) ? html`data-expiring="yes"` : ''}
                >
                  <td>
                    <input
                      type="checkbox"
                      name="ref"
                      value="${ref(e)}"
                      aria-label="${`select ${ref(e)}`}"
                      ${canAct ? '' : html`disabled`}
                    />
                  </td>
                  <td>
                    ${new Date(deadLetteredAt(e)).toISOString()}${expiringSoon(e, expiry) ? html` <span class="status status-dead_lettered">expires soon</span>` : ''}
                  </td>
                  <td><a href="/dlq/record${query({ ref: ref(e) })}">${ref(e)}</a></td>
                  <td><code>${e.eventId}</code></td>
                  <td>${e.tenantId}</td>
                  <td>${entrySource(e)}</td>
                  <td>${entryReason(e)}</td>
                  <td>${e.info?.attempt}</td>
                  <td data-col="inbox">${statusOf(statuses, e)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
      </div>
      ${older ? html`<p><a href="${older}" data-testid="dlq-older">Older records →</a></p>` : ''}
      <p>
        <button type="submit" name="scope" value="selected" ${canAct ? '' : html`disabled`}>Preview replay of the selected</button>
        <button type="submit" name="scope" value="filter" ${canAct && selected.length > 0 ? '' : html`disabled`}>
          Preview replay of all matching in this time window
        </button>
      </p>
    </form>`;
  return page('Dead letters', ctx, body);
}

export function dlqRecordPage(
  ctx: PageContext,
  refText: string,
  view: { topic: string; entries: Part<DlqEntry[]>; statuses: Part<Map<string, InboxStatus>> },
  expiry: Part<DlqExpiry>,
): string {
  const statuses = view.statuses.ok ? view.statuses.value : undefined;
  const matches = view.entries.ok ? view.entries.value : [];
  const canAct = ctx.actionsEnabled && ctx.operator !== undefined;
  const body = html` ${problems([view.entries.ok ? undefined : view.entries.problem])}
    ${view.entries.ok && matches.length === 0 ? html`<p role="status">No record ${refText} on ${view.topic} (never written, or deleted by retention).</p>` : ''}
    ${matches.map((e) => {
      const headers = redactHeaders(headersAsText(e.headers));
      const expires = expiresAt(e, expiry.ok ? expiry.value : undefined);
      return html`<section aria-label="${`record ${ref(e)}`}">
        ${
          expiringSoon(e, expiry.ok ? expiry.value : undefined)
            ? html`<p class="problem" role="alert" data-testid="record-expiry">
                The broker may delete this dead letter from ${new Date(expires!).toISOString()} (the DLQ's retention): replay it before then
                or it can no longer be replayed.
              </p>`
            : ''
        }
        <dl class="facts">
          <dt>record</dt>
          <dd>${view.topic} ${ref(e)}</dd>
          <dt>event id</dt>
          <dd><code>${e.eventId}</code></dd>
          <dt>key</dt>
          <dd><code>${e.key?.toString('utf8') ?? '(null)'}</code></dd>
          <dt>reason</dt>
          <dd data-testid="reason">${entryReason(e)}</dd>
          <dt>attempt</dt>
          <dd>${e.info?.attempt ?? '—'}</dd>
          <dt>dead-lettered</dt>
          <dd>${new Date(deadLetteredAt(e)).toISOString()}</dd>
          <dt>deleted by retention from</dt>
          <dd data-testid="expires">${expires === undefined ? 'never (no retention)' : new Date(expires).toISOString()}</dd>
          <dt>original</dt>
          <dd>
            ${e.info ? `${e.info.originalTopic}/${e.info.originalPartition}@${e.info.originalOffset} (failed on ${e.info.failedTopic})` : (e.problem ?? '')}
          </dd>
          <dt>error</dt>
          <dd data-testid="error">${e.info ? `${e.info.lastErrorCode}: ${e.info.lastErrorMessage}` : ''}</dd>
          <dt>inbox now</dt>
          <dd>${statusOf(statuses, e)}</dd>
        </dl>
        <h2>Headers</h2>
        <table data-testid="headers">
          <tbody>
            ${Object.entries(headers).map(
              ([k, v]) =>
                html`<tr>
                  <th scope="row">${k}</th>
                  <td><code>${v}</code></td>
                </tr>`,
            )}
          </tbody>
        </table>
        <h2>Body</h2>
        <pre tabindex="0" data-testid="body">${redactedBody(e.value)}</pre>
        ${
          canAct
            ? html`<form method="post" action="/dlq/replay">
                ${actionHidden(ctx)}<input type="hidden" name="ref" value="${ref(e)}" />
                <button type="submit" name="scope" value="selected">Preview replay of this record</button>
              </form>`
            : replayNote(ctx)
        }
      </section>`;
    })}
    <p><a href="/dlq">← All dead letters</a></p>`;
  return page(`Dead letter ${refText}`, ctx, body);
}

export function replayPreviewPage(
  ctx: PageContext,
  plan: ReplayPlanRow[],
  refs: string[],
  statuses: Map<string, InboxStatus> | undefined,
  events: string,
): string {
  const body = html` <p role="status" data-testid="preview-summary">
      Dry run: <strong>${plan.length}</strong> record(s) would be replayed to <code>${events}</code> (nothing sent yet). An event
      dead-lettered several times is replayed once, from its latest record.
    </p>
    <table data-testid="plan">
      <thead>
        <tr>
          <th scope="col">from</th>
          <th scope="col">event id</th>
          <th scope="col">key</th>
          <th scope="col">reason</th>
          <th scope="col">inbox now</th>
        </tr>
      </thead>
      <tbody>
        ${plan.map(
          (p) =>
            html`<tr>
              <td>${p.from}</td>
              <td><code>${p.event_id}</code></td>
              <td>${p.key}</td>
              <td>${p.reason}</td>
              <td>${statuses?.get(p.from)?.status ?? ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${
      plan.length > 0
        ? html`<form method="post" action="/dlq/replay">
            ${actionHidden(ctx)}<input type="hidden" name="confirm" value="yes" />
            ${refs.map((r) => html`<input type="hidden" name="ref" value="${r}" />`)}
            <button type="submit" name="scope" value="selected">Replay ${plan.length} record(s) now</button>
            <a href="/dlq">Cancel</a>
          </form>`
        : html`<p><a href="/dlq">Back</a></p>`
    }`;
  return page('Replay: preview', ctx, body);
}

export function replayResultPage(ctx: PageContext, outcomes: ReplayOutcome[]): string {
  const failed = outcomes.filter((o) => !o.ok).length;
  const body = html` <p role="status" data-testid="replay-summary">${outcomes.length} replayed, ${failed} failed.</p>
    <table data-testid="outcomes">
      <thead>
        <tr>
          <th scope="col">from</th>
          <th scope="col">event id</th>
          <th scope="col">outcome</th>
          <th scope="col">detail</th>
        </tr>
      </thead>
      <tbody>
        ${outcomes.map(
          (o) =>
            html`<tr>
              <td>${o.from}</td>
              <td><code>${o.event_id}</code></td>
              <td data-col="outcome">${o.status}</td>
              <td>${o.detail}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    <p><a href="/dlq">← Dead letters</a></p>`;
  return page('Replay: outcome', ctx, body);
}
