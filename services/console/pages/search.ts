import { html, query } from '../html.ts';
import type { Part } from '../readers.ts';
import type { SearchHitRow } from '#domain/store/operator-views.ts';
import { iso, page, problems, type PageContext } from './layout.ts';

export function searchPage(ctx: PageContext, term: string, hits: Part<SearchHitRow[]> | undefined): string {
  const body = html` <form method="get" action="/search" class="fields" role="search">
      <label>event id, idempotency key, trace id or resource (id or tenant/type/id) <input name="q" value="${term}" required /></label>
      <button type="submit">Search</button>
    </form>
    ${hits && !hits.ok ? problems([hits.problem]) : ''}
    ${
      hits?.ok
        ? hits.value.length === 0
          ? html`<p role="status">Nothing matches <code>${term}</code>.</p>`
          : html`<table data-testid="search-results">
              <thead>
                <tr>
                  <th scope="col">matched</th>
                  <th scope="col">received</th>
                  <th scope="col">event id</th>
                  <th scope="col">resource</th>
                  <th scope="col">version</th>
                  <th scope="col">status</th>
                  <th scope="col">idempotency key</th>
                  <th scope="col">trace id</th>
                </tr>
              </thead>
              <tbody>
                ${hits.value.map(
                  (h) =>
                    html`<tr>
                      <td>${h.matched}</td>
                      <td>${iso(h.received_at ?? h.first_seen_at)}</td>
                      <td><code>${h.event_id}</code></td>
                      <td>
                        ${
                          h.resource_type && h.resource_id
                            ? html`<a href="/resource${query({ tenant: h.tenant_id, type: h.resource_type, id: h.resource_id })}"
                                >${h.tenant_id}/${h.resource_type}/${h.resource_id}</a
                              >`
                            : h.tenant_id
                        }
                      </td>
                      <td>${h.resource_version}</td>
                      <td>${h.status}</td>
                      <td>${h.idempotency_key}</td>
                      <td>${h.trace_id ? html`<code>${h.trace_id}</code>` : ''}</td>
                    </tr>`,
                )}
              </tbody>
            </table>`
        : ''
    }`;
  return page('Search', ctx, body);
}

export function signInPage(ctx: PageContext, message?: string, next = '/'): string {
  const body = ctx.actionsEnabled
    ? html`${message ? html`<p class="problem" role="alert">${message}</p>` : ''}
        <form method="post" action="/sign-in" class="fields">
          <input type="hidden" name="next" value="${next}" />
          <label>your name <input name="operator" autocomplete="username" required /></label>
          <label>operator token <input name="token" type="password" autocomplete="current-password" required /></label>
          <button type="submit">Sign in</button>
        </form>`
    : html`<p>Actions are disabled: set CONSOLE_OPERATOR_TOKEN for the console to allow replays.</p>`;
  return page('Sign in', ctx, body);
}

export function refusedPage(ctx: PageContext, reason: string): string {
  return page(
    'Refused',
    ctx,
    html`<p class="problem" role="alert">${reason}</p>
      <p><a href="/sign-in">Sign in</a></p>`,
  );
}
