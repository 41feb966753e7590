// The sources' audit log: who changed what and when, newest first, each change as field: from → to.
// The catalog writes the diffs; they name secrets by id and key id only, never a value.
import type { AuditEntry } from '#domain/sources/index.ts';
import { html, query, type SafeHtml } from '../html.ts';
import { page, type PageContext } from './layout.ts';
import { sourceHref } from './source-links.ts';

/** Entries per audit page. */
export const AUDIT_PAGE = 50;
// Past this length a value is folded: a strict schema or reconcile block would swamp the table.
const FOLD_AT = 120;

const ACTION_MEANING: Record<string, string> = {
  create: 'created',
  update: 'spec edited',
  enable: 'enabled',
  disable: 'disabled',
  delete: 'deleted',
  rotate: 'secret rotated',
  apply: 'applied from a sources file',
  rekey: 'secret re-sealed under another key',
};

function value(v: unknown): SafeHtml {
  if (v === undefined) return html`<span class="muted">(none)</span>`;
  const compact = JSON.stringify(v);
  if (compact.length <= FOLD_AT) return html`<code>${compact}</code>`;
  return html`<details>
    <summary><code>${compact.slice(0, FOLD_AT)}…</code></summary>
    <pre tabindex="0">${JSON.stringify(v, null, 2)}</pre>
  </details>`;
}

function isChange(c: unknown): c is { field: string; from?: unknown; to?: unknown } {
  return typeof c === 'object' && c !== null && typeof (c as { field?: unknown }).field === 'string';
}

/** A diff as the catalog writes it (a list of field changes); anything else as JSON. */
export function diffHtml(diff: unknown): SafeHtml {
  if (!Array.isArray(diff) || !diff.every(isChange)) return value(diff);
  if (diff.length === 0) return html`<span class="muted">no field changed</span>`;
  return html`<ul class="changes">
    ${diff.map((c) => {
      const has = (k: 'from' | 'to') => Object.prototype.hasOwnProperty.call(c, k);
      const arrow =
        has('from') && has('to')
          ? html`${value(c.from)} → ${value(c.to)}`
          : has('to')
            ? html`set to ${value(c.to)}`
            : html`removed (was ${value(c.from)})`;
      return html`<li><code>${c.field}</code>: ${arrow}</li>`;
    })}
  </ul>`;
}

export function auditTable(entries: readonly AuditEntry[], showSource: boolean): SafeHtml {
  if (entries.length === 0) return html`<p class="muted" data-testid="audit-empty">No change recorded.</p>`;
  return html`<div class="scroll">
    <table data-testid="audit">
      <thead>
        <tr>
          <th scope="col">when</th>
          <th scope="col">who</th>
          <th scope="col">what</th>
          ${showSource ? html`<th scope="col">source</th>` : ''}
          <th scope="col">config version</th>
          <th scope="col">changes</th>
        </tr>
      </thead>
      <tbody>
        ${entries.map(
          (e) =>
            html`<tr data-audit-id="${e.id}" data-action="${e.action}">
              <td>${e.at}</td>
              <td data-col="actor">${e.actor}</td>
              <td data-col="action" title="${ACTION_MEANING[e.action] ?? ''}">${e.action}</td>
              ${showSource ? html`<td>${e.sourceId === null ? '' : html`<a href="${sourceHref(e.sourceId)}">${e.sourceId}</a>`}</td>` : ''}
              <td>${e.configVersion}</td>
              <td data-col="diff">${diffHtml(e.diff)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

/** The older page's link when this one is full. */
export function olderLink(entries: readonly AuditEntry[], sourceId: string | undefined, limit = AUDIT_PAGE): SafeHtml {
  const last = entries[entries.length - 1];
  if (entries.length < limit || last === undefined) return html``;
  return html`<p><a data-testid="audit-older" href="/sources/audit${query({ source: sourceId, before: last.id })}">Older changes</a></p>`;
}

export function auditPage(
  ctx: PageContext,
  entries: readonly AuditEntry[],
  filter: { source?: string | undefined; before?: number | undefined },
): string {
  const body = html`<p>
      Every change to the sources, newest first: who made it (an API token's name, <code>console:operator</code> for this console,
      <code>cli:&lt;user&gt;</code> for <code>bridge sources</code>), the configuration version it produced, and what changed. Secrets
      appear by id and key id only; their values are never recorded.
    </p>
    <form method="get" action="/sources/audit" class="fields">
      <label>source <input name="source" value="${filter.source ?? ''}" /></label>
      <button type="submit">Show</button>
      ${filter.source || filter.before ? html`<a href="/sources/audit">All, newest first</a>` : ''}
    </form>
    ${auditTable(entries, true)} ${olderLink(entries, filter.source)}`;
  return page(filter.source ? `Sources audit: ${filter.source}` : 'Sources audit', ctx, body);
}
