// Where a source's pages live. /sources/<id> for most ids; an id that is also a page of its own
// (new, audit, show, edit) or a dot segment a browser would resolve away goes by query string.
import { query } from '../html.ts';

const TAKEN = new Set(['new', 'audit', 'show', 'edit']);

export function sourceHref(id: string): string {
  return TAKEN.has(id) || /^\.+$/.test(id) ? `/sources/show${query({ id })}` : `/sources/${encodeURIComponent(id)}`;
}

export function sourceEditHref(id: string): string {
  return `/sources/edit${query({ id })}`;
}

/** A source's page with a note of what was just done. */
export function sourceHrefWith(id: string, params: Record<string, string>): string {
  const href = sourceHref(id);
  const extra = query(params).slice(1);
  return extra === '' ? href : `${href}${href.includes('?') ? '&' : '?'}${extra}`;
}
