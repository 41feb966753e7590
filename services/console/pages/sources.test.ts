import { describe, expect, it } from 'vitest';
import { CatalogError, SourceInputError, type SourceView } from '#domain/sources/index.ts';
import { parseSpecText, refusalOf } from '../routes/sources.ts';
import { sourceHref, sourceHrefWith } from './source-links.ts';
import { diffHtml, auditTable } from './sources-audit.ts';
import { editSourcePage, sourcePage, sourcesListPage } from './sources.ts';

const ctx = { actionsEnabled: true, operator: 'ada', csrf: 'tok', path: '/sources' };
const evil = '<script>alert(1)</script>';

const source: SourceView = {
  id: 'shop',
  enabled: true,
  revision: 3,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-02T00:00:00.000Z',
  spec: {
    id: 'shop',
    scheme: 'hmac-sha256',
    tenants: [evil],
    toleranceSeconds: 300,
    resourceTypes: ['theme'],
    strictSchemas: {},
    ordering: 'version',
    maxFutureSkewSeconds: 300,
  },
  secrets: [{ id: 'k1', keyId: 'a', createdAt: '2026-01-01T00:00:00.000Z', retireAfter: null, lastVerifiedAt: null, state: 'active' }],
};

describe('the sources pages', () => {
  it('a source whose id is also a page, or a dot segment, is linked by query string', () => {
    expect(sourceHref('shop-a')).toBe('/sources/shop-a');
    for (const id of ['new', 'audit', 'show', 'edit', '.', '..']) expect(sourceHref(id)).toBe(`/sources/show?id=${encodeURIComponent(id)}`);
    expect(sourceHrefWith('new', { done: 'updated' })).toBe('/sources/show?id=new&done=updated');
    expect(sourceHrefWith('shop', { done: 'updated' })).toBe('/sources/shop?done=updated');
  });

  it('escapes what the database holds, in the list, the details, the edit form and the audit diffs', () => {
    const list = sourcesListPage(ctx, { sources: [source], version: 1, instances: [], keyringSet: true, now: Date.now() });
    const details = sourcePage(ctx, {
      source,
      audit: [{ id: 1, at: 'x', actor: evil, action: 'update', sourceId: 'shop', configVersion: 1, diff: [{ field: evil, to: evil }] }],
      auditLimit: 20,
      now: Date.now(),
      keyringSet: true,
      rotate: { secretId: evil, mode: 'generate', retireOthersAfter: evil },
    });
    const edit = editSourcePage(ctx, { id: 'shop', revision: 3, specText: `</textarea>${evil}` });
    for (const page of [list, details, edit]) expect(page).not.toContain('<script>alert');
    expect(details).toContain('name="revision" value="3"');
    expect(details).toContain('name="csrf" value="tok"');
  });

  it('renders a diff as field: from → to, folding long values, and any other diff as JSON', () => {
    const text = diffHtml([
      { field: 'enabled', from: true, to: false },
      { field: 'tenants', to: ['a'] },
      { field: 'limits', from: 1 },
    ]).text;
    expect(text).toContain('<code>enabled</code>: <code>true</code> → <code>false</code>');
    expect(text).toContain('set to <code>[&quot;a&quot;]</code>');
    expect(text).toContain('removed (was <code>1</code>)');
    expect(diffHtml([{ field: 'strictSchemas', to: { s: 'x'.repeat(300) } }]).text).toContain('<details>');
    expect(diffHtml({ odd: 1 }).text).toContain('{&quot;odd&quot;:1}');
    expect(auditTable([], true).text).toContain('No change recorded');
  });

  it("a catalog refusal keeps its status and its fields' paths; a stale revision says to reload", () => {
    expect(refusalOf(new SourceInputError(422, [{ path: 'tenants', message: 'x' }]))).toMatchObject({
      status: 422,
      problems: [{ path: 'tenants', message: 'x' }],
    });
    expect(refusalOf(new CatalogError(412, 'stale_revision', 'at 4, not 3'))?.message).toContain('changed meanwhile: reload');
    expect(refusalOf(new CatalogError(409, 'exists', 'source "a" exists'))?.status).toBe(409);
    expect(refusalOf(new Error('boom'))).toBeUndefined();
  });

  it('a textarea that is not a JSON object is refused without quoting its text', () => {
    expect(parseSpecText('{"id": "a"}')).toEqual({ id: 'a' });
    for (const bad of ['{"value": "s3cr3t-pasted", oops}', '[1]', 'null', '']) {
      let error: unknown;
      try {
        parseSpecText(bad);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(SourceInputError);
      expect((error as SourceInputError).status).toBe(400);
      expect((error as SourceInputError).message).not.toContain('s3cr3t');
    }
  });
});
