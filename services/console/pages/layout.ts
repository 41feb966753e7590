import { html, type SafeHtml } from '../html.ts';

export interface PageContext {
  /** The signed-in operator, if any. */
  operator?: string | undefined;
  csrf?: string | undefined;
  actionsEnabled: boolean;
  /** The current path, for the navigation's aria-current. */
  path: string;
}

const NAV = [
  { href: '/', label: 'Overview' },
  { href: '/dlq', label: 'Dead letters' },
  { href: '/resource', label: 'Resource' },
  { href: '/search', label: 'Search' },
  { href: '/sources', label: 'Sources' },
];

/** Problems reaching Postgres, the broker or the ingress: one banner each, at the top. */
export function problems(list: Array<string | undefined>): SafeHtml {
  const unique = [...new Set(list.filter((p): p is string => p !== undefined))];
  return html`${unique.map((p) => html`<p class="problem" role="alert">Unreachable — ${p}</p>`)}`;
}

export function page(title: string, ctx: PageContext, body: SafeHtml): string {
  const signedIn = ctx.operator
    ? html`<form method="post" action="/sign-out" class="inline">
        <input type="hidden" name="csrf" value="${ctx.csrf}" />
        <span>operator <strong data-testid="operator">${ctx.operator}</strong></span>
        <button type="submit">Sign out</button>
      </form>`
    : ctx.actionsEnabled
      ? html`<a href="/sign-in">Sign in to act</a>`
      : html`<span class="muted">read-only (no CONSOLE_OPERATOR_TOKEN)</span>`;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · theme-bridge console</title>
        <link rel="stylesheet" href="/assets/uPlot.min.css" />
        <link rel="stylesheet" href="/assets/console.css" />
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <header>
          <nav aria-label="Main">
            <strong>theme-bridge</strong>
            ${NAV.map((n) => html`<a href="${n.href}" ${n.href === ctx.path ? html`aria-current="page"` : ''}>${n.label}</a>`)}
          </nav>
          <form method="get" action="/search" role="search" class="inline">
            <label for="q-top" class="visually-hidden">Search</label>
            <input id="q-top" name="q" placeholder="event id, idempotency key, trace id or resource" />
            <button type="submit">Search</button>
          </form>
          <div class="who">${signedIn}</div>
        </header>
        <main id="main">
          <h1>${title}</h1>
          ${body}
        </main>
        <script src="/assets/uPlot.iife.min.js"></script>
        <script src="/assets/console.js"></script>
      </body>
    </html> `.text;
}

export const iso = (d: Date | string | null | undefined): string => (d ? (typeof d === 'string' ? d : d.toISOString()) : '');
