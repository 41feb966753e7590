// The sources pages: the list (with the configuration version each ingress and worker serves), a
// source's details, and the forms that create, edit, enable or disable and rotate one. Every form
// carries the session's CSRF token and the revision it was rendered from; the catalog refuses a
// stale revision. A generated secret appears once, on the page that answers the create or rotate.
import type { AuditEntry, FieldProblem, SecretView, SourceView } from '#domain/sources/index.ts';
import type { InstanceRow } from '#domain/store/sources.ts';
import { html, query, type SafeHtml } from '../html.ts';
import { page, type PageContext } from './layout.ts';
import { auditTable, olderLink } from './sources-audit.ts';
import { sourceEditHref, sourceHref } from './source-links.ts';

/** A change the catalog (or the form) refused: the HTTP status, what to say, and each field's problem. */
export interface FormRefusal {
  status: number;
  message: string;
  problems: FieldProblem[];
}

export const EXAMPLE_SPEC = {
  id: 'acme-shop',
  scheme: 'hmac-sha256',
  tenants: ['tenant_acme'],
  resourceTypes: ['theme'],
  ordering: 'version',
  toleranceSeconds: 300,
};

const SECRET_STATE_MEANING: Record<SecretView['state'], string> = {
  active: 'verifies requests',
  retiring: 'verifies requests until its retireAfter, refused after',
  retired: 'past its retireAfter: refused',
};

function ago(at: string, now: number): string {
  const s = Math.round((now - Date.parse(at)) / 1000);
  if (s < 0) return 'in the future';
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  if (s < 172_800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86_400)} days ago`;
}

function orderingText(ordering: SourceView['spec']['ordering']): string {
  return typeof ordering === 'string'
    ? ordering
    : Object.entries(ordering)
        .map(([type, o]) => `${type}: ${o}`)
        .join(', ');
}

function limitsText(limits: SourceView['spec']['limits']): string {
  if (limits === undefined) return 'none';
  const parts = [];
  if (limits.requestsPerSecond !== undefined) parts.push(`${limits.requestsPerSecond} req/s`);
  if (limits.bytesPerSecond !== undefined) parts.push(`${limits.bytesPerSecond} B/s`);
  return `${parts.join(', ')} per ingress`;
}

function secretsSummary(secrets: readonly SecretView[]): string {
  const counts = new Map<string, number>();
  for (const s of secrets) counts.set(s.state, (counts.get(s.state) ?? 0) + 1);
  return `${secrets.length}: ${[...counts].map(([state, n]) => `${n} ${state}`).join(', ')}`;
}

/** The refusal at the top of a form, each problem with the field it is about. */
export function refusalHtml(refusal: FormRefusal | undefined): SafeHtml {
  if (refusal === undefined) return html``;
  return html`<div class="problem" role="alert" data-testid="refusal" data-status="${refusal.status}">
    <p>${refusal.message}</p>
    ${
      refusal.problems.length > 0
        ? html`<ul data-testid="problems">
            ${refusal.problems.map((p) => html`<li><code data-testid="problem-path">${p.path || '(the whole spec)'}</code>: ${p.message}</li>`)}
          </ul>`
        : ''
    }
  </div>`;
}

const csrfField = (ctx: PageContext) => html`<input type="hidden" name="csrf" value="${ctx.csrf ?? ''}" />`;

/** Why no form is shown, or undefined when the operator may act. */
function cannotAct(ctx: PageContext, next: string, what: string): SafeHtml | undefined {
  if (!ctx.actionsEnabled)
    return html`<p class="muted" data-testid="cannot-act">Changes are disabled: no CONSOLE_OPERATOR_TOKEN configured.</p>`;
  if (!ctx.operator)
    return html`<p class="muted" data-testid="cannot-act"><a href="/sign-in${query({ next })}">Sign in</a> to ${what}.</p>`;
  return undefined;
}

function keyringBanner(keyringSet: boolean): SafeHtml {
  return keyringSet
    ? html``
    : html`<p class="problem" role="alert" data-testid="no-keyring">
        BRIDGE_SECRET_KEYS is not set for the console: sources can be read, but every change is refused (503), since a change checks the
        secrets of the whole set.
      </p>`;
}

function instancesSection(instances: readonly InstanceRow[], version: number, now: number): SafeHtml {
  const behind = instances.filter((i) => i.configVersion < version).length;
  return html`<section aria-labelledby="instances-h">
    <h2 id="instances-h">Who serves which version</h2>
    <p>
      Each ingress and worker that reads its sources from Postgres reports the configuration version it serves every few seconds. One below
      <strong>${version}</strong> is <strong>behind</strong>: it has not loaded the latest change (yet).
    </p>
    ${
      instances.length === 0
        ? html`<p class="muted" data-testid="instances-empty">
            No ingress or worker has reported in the last hour (only those started with SOURCES_FROM=postgres report).
          </p>`
        : html`<table data-testid="instances">
              <thead>
                <tr>
                  <th scope="col">instance</th>
                  <th scope="col">role</th>
                  <th scope="col">serves version</th>
                  <th scope="col">last report</th>
                </tr>
              </thead>
              <tbody>
                ${instances.map(
                  (i) =>
                    html`<tr data-instance="${i.instance}">
                      <td><code>${i.instance}</code></td>
                      <td>${i.role}</td>
                      <td data-col="version">
                        ${i.configVersion}
                        ${i.configVersion < version ? html`<strong class="status-quarantined" data-testid="behind">behind</strong>` : ''}
                      </td>
                      <td>${i.seenAt.toISOString()} (${ago(i.seenAt.toISOString(), now)})</td>
                    </tr>`,
                )}
              </tbody>
            </table>
            ${behind > 0 ? html`<p role="status">${behind} instance(s) behind.</p>` : ''}`
    }
  </section>`;
}

export interface SourcesListView {
  sources: readonly SourceView[];
  version: number;
  instances: readonly InstanceRow[];
  keyringSet: boolean;
  now: number;
}

export function sourcesListPage(ctx: PageContext, view: SourcesListView): string {
  const body = html`${keyringBanner(view.keyringSet)}
    <p>
      Who may send webhooks: each source's scheme, tenants, resource types and ordering, held in Postgres. Every change bumps the
      configuration version (now <strong data-testid="config-version">${view.version}</strong>) and reaches every ingress and worker within
      seconds. <a href="/sources/new">New source</a> · <a href="/sources/audit">Audit log</a>
    </p>
    ${
      view.sources.length === 0
        ? html`<p class="muted" data-testid="sources-empty">No source in the database.</p>`
        : html`<div class="scroll">
            <table data-testid="sources">
              <thead>
                <tr>
                  <th scope="col">id</th>
                  <th scope="col">state</th>
                  <th scope="col">scheme</th>
                  <th scope="col">tenants</th>
                  <th scope="col">types</th>
                  <th scope="col">ordering</th>
                  <th scope="col">limits</th>
                  <th scope="col">secrets</th>
                  <th scope="col">revision</th>
                  <th scope="col">updated</th>
                </tr>
              </thead>
              <tbody>
                ${view.sources.map(
                  (s) =>
                    html`<tr data-source-id="${s.id}">
                      <td>
                        <a href="${sourceHref(s.id)}"><code>${s.id}</code></a>
                      </td>
                      <td data-col="enabled">${s.enabled ? 'enabled' : html`<strong>disabled</strong>`}</td>
                      <td>${s.spec.scheme}</td>
                      <td>${s.spec.tenants.join(', ')}</td>
                      <td>${s.spec.resourceTypes.join(', ')}</td>
                      <td>${orderingText(s.spec.ordering)}</td>
                      <td>${limitsText(s.spec.limits)}</td>
                      <td data-col="secrets">${secretsSummary(s.secrets)}</td>
                      <td data-col="revision">${s.revision}</td>
                      <td>${s.updatedAt}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
    }
    ${instancesSection(view.instances, view.version, view.now)}`;
  return page('Sources', ctx, body);
}

export interface SecretFormValues {
  secretId: string;
  mode: 'generate' | 'value';
}

/** The secret's fields: generate one (shown once) or paste the provider's. The pasted value is never put back. */
function secretFields(values: SecretFormValues, idLabel: string, idRequired: boolean): SafeHtml {
  return html`<fieldset class="fields">
    <legend>Secret</legend>
    <label
      >${idLabel} <input name="secret_id" value="${values.secretId}" ${idRequired ? html`required` : ''} pattern="[A-Za-z0-9_.-]{1,64}"
    /></label>
    <label
      ><span
        ><input type="radio" name="secret_mode" value="generate" ${values.mode === 'generate' ? html`checked` : ''} /> generate one (shown
        once)</span
      ></label
    >
    <label
      ><span><input type="radio" name="secret_mode" value="value" ${values.mode === 'value' ? html`checked` : ''} /> use this value</span>
      <input name="secret_value" type="password" autocomplete="off" aria-label="secret value"
    /></label>
  </fieldset>`;
}

export interface NewSourceForm extends SecretFormValues {
  specText: string;
}

export function newSourcePage(ctx: PageContext, form: NewSourceForm, refusal?: FormRefusal, keyringSet = true): string {
  const blocked = cannotAct(ctx, '/sources/new', 'create a source');
  const body = html`${keyringBanner(keyringSet)} ${refusalHtml(refusal)}
    <p>
      The source as JSON, as in a sources file but without <code>secrets</code> (given below) and with any strict schema inline as a JSON
      Schema object. Fields left out take their defaults.
    </p>
    ${
      blocked ??
      html`<form method="post" action="/sources/create" data-testid="create-form">
        ${csrfField(ctx)}
        <label for="spec">source (JSON)</label>
        <textarea id="spec" name="spec" rows="16" spellcheck="false" class="code">${form.specText}</textarea>
        ${secretFields(form, 'secret id', true)}
        <button type="submit">Create</button>
        <a href="/sources">Cancel</a>
      </form>`
    }`;
  return page('New source', ctx, body);
}

/** A secret the bridge generated, shown on this page only: after it, only the provider knows it. */
function shownOnce(secretId: string, value: string): SafeHtml {
  return html`<section class="problem" data-testid="shown-once" aria-labelledby="once-h">
    <h2 id="once-h">Secret <code>${secretId}</code>: copy it now</h2>
    <p><strong>It will not be shown again.</strong> The bridge keeps it sealed; give it to the provider as the signing secret.</p>
    <p>
      <output data-testid="generated-secret" data-secret-id="${secretId}"><code>${value}</code></output>
    </p>
  </section>`;
}

export function sourceCreatedPage(ctx: PageContext, source: SourceView, generated: ReadonlyArray<{ id: string; value: string }>): string {
  const body = html`<p role="status" data-testid="created">
      Source <a href="${sourceHref(source.id)}"><code>${source.id}</code></a> created (${source.enabled ? 'enabled' : 'disabled'}, revision
      ${source.revision}). Every ingress verifies its requests within seconds.
    </p>
    ${generated.map((g) => shownOnce(g.id, g.value))}
    <p><a href="${sourceHref(source.id)}">Go to the source</a> · <a href="/sources">All sources</a></p>`;
  return page(`Source ${source.id} created`, ctx, body);
}

export function sourceRotatedPage(ctx: PageContext, source: SourceView, secretId: string, generated: string | undefined): string {
  const others = source.secrets.filter((s) => s.id !== secretId && s.state !== 'retired');
  const body = html`<p role="status" data-testid="rotated">
      Secret <code>${secretId}</code> added to <a href="${sourceHref(source.id)}"><code>${source.id}</code></a
      >: it verifies at once.
      ${
        others.length > 0
          ? html`The other secrets verify until their retireAfter:
            ${others.map((s, i) => html`${i > 0 ? ', ' : ''}<code>${s.id}</code> until ${s.retireAfter ?? 'no end'}`)}.`
          : ''
      }
    </p>
    ${generated === undefined ? html`<p>The value you gave is stored sealed.</p>` : shownOnce(secretId, generated)}
    <p>
      Once the provider signs with the new secret, its "last verified" time on the source's page moves.
      <a href="${sourceHref(source.id)}">Go to the source</a>
    </p>`;
  return page(`Source ${source.id}: secret rotated`, ctx, body);
}

export interface RotateForm extends SecretFormValues {
  retireOthersAfter: string;
}

export interface SourcePageView {
  source: SourceView;
  audit: readonly AuditEntry[];
  auditLimit: number;
  now: number;
  keyringSet: boolean;
  /** What was just done (after a redirect). */
  notice?: string | undefined;
  rotate: RotateForm;
  /** A refused rotate (shown at its form) or enable/disable (at the top). */
  rotateRefusal?: FormRefusal | undefined;
  refusal?: FormRefusal | undefined;
}

const NOTICES: Record<string, string> = {
  enabled: 'Enabled: every ingress verifies its requests again within seconds.',
  disabled:
    'Disabled: within seconds every ingress answers its requests as it answers an unknown source (401). Its events already on the topic still apply.',
  updated: 'Saved: every ingress and worker serves the new spec within seconds.',
};

function secretsTable(secrets: readonly SecretView[], now: number): SafeHtml {
  return html`<div class="scroll">
    <table data-testid="secrets">
      <thead>
        <tr>
          <th scope="col">secret id</th>
          <th scope="col">key id</th>
          <th scope="col">state</th>
          <th scope="col">retire after</th>
          <th scope="col">created</th>
          <th scope="col">last verified a request</th>
        </tr>
      </thead>
      <tbody>
        ${secrets.map(
          (s) =>
            html`<tr data-secret-id="${s.id}">
              <td><code>${s.id}</code></td>
              <td><code>${s.keyId}</code></td>
              <td data-col="state" title="${SECRET_STATE_MEANING[s.state]}">
                ${s.state === 'active' ? s.state : html`<strong>${s.state}</strong>`}
              </td>
              <td data-col="retire-after">${s.retireAfter ?? ''}</td>
              <td>${s.createdAt}</td>
              <td data-col="last-verified">
                ${s.lastVerifiedAt === null ? html`<span class="muted">never</span>` : html`<time datetime="${s.lastVerifiedAt}">${s.lastVerifiedAt}</time> (${ago(s.lastVerifiedAt, now)})`}
              </td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

export function sourcePage(ctx: PageContext, view: SourcePageView): string {
  const { source: s } = view;
  const here = sourceHref(s.id);
  const blocked = cannotAct(ctx, here, 'change this source');
  const revision = html`<input type="hidden" name="id" value="${s.id}" /><input type="hidden" name="revision" value="${s.revision}" />`;
  const body = html`${keyringBanner(view.keyringSet)}
    ${view.notice && NOTICES[view.notice] ? html`<p role="status" data-testid="notice">${NOTICES[view.notice]}</p>` : ''}
    ${refusalHtml(view.refusal)}
    <dl class="facts" data-testid="source-facts">
      <dt>state</dt>
      <dd data-testid="source-enabled">${s.enabled ? 'enabled' : html`<strong>disabled</strong> (answered like an unknown source)`}</dd>
      <dt>revision</dt>
      <dd data-testid="source-revision">${s.revision}</dd>
      <dt>limits</dt>
      <dd>${limitsText(s.spec.limits)}</dd>
      <dt>created</dt>
      <dd>${s.createdAt}</dd>
      <dt>updated</dt>
      <dd>${s.updatedAt}</dd>
    </dl>
    ${
      blocked ??
      html`<form method="post" action="/sources/enabled" class="inline" data-testid="enabled-form">
        ${csrfField(ctx)} ${revision}
        <input type="hidden" name="enabled" value="${s.enabled ? 'false' : 'true'}" />
        <button type="submit">${s.enabled ? 'Disable' : 'Enable'}</button>
        <span class="muted"
          >${
            s.enabled
              ? 'A disabled source is answered like an unknown one (401); its events already on the topic still apply.'
              : 'Its secrets verify again at once.'
          }</span
        >
      </form>`
    }

    <h2>Secrets</h2>
    <p class="muted">
      Values are never shown after the page that created them. "Last verified" is when an ingress last accepted a request signed with the
      secret: after a rotation, a time on the new secret means the provider has switched.
    </p>
    ${secretsTable(s.secrets, view.now)}

    <section aria-labelledby="rotate-h">
      <h2 id="rotate-h">Rotate</h2>
      <p>
        A new secret verifies at once; every secret already there keeps verifying until the time below (the overlap in which the provider
        switches), and is refused after.
      </p>
      ${refusalHtml(view.rotateRefusal)}
      ${
        blocked ??
        html`<form method="post" action="/sources/rotate" data-testid="rotate-form">
          ${csrfField(ctx)} ${revision} ${secretFields(view.rotate, 'new secret id (empty: the source id and the time)', false)}
          <label
            >retire the others after (ISO 8601 with an offset)
            <input name="retire_others_after" value="${view.rotate.retireOthersAfter}" required
          /></label>
          <button type="submit">Rotate</button>
        </form>`
      }
    </section>

    <h2>Spec</h2>
    <p>${blocked ? '' : html`<a href="${sourceEditHref(s.id)}" data-testid="edit-link">Edit the spec</a>`}</p>
    <pre tabindex="0" data-testid="source-spec">${JSON.stringify(s.spec, null, 2)}</pre>

    <h2>Changes to this source</h2>
    ${auditTable(view.audit, false)} ${olderLink(view.audit, s.id, view.auditLimit)}`;
  return page(`Source ${s.id}`, ctx, body);
}

export interface EditForm {
  id: string;
  revision: number;
  specText: string;
}

export function editSourcePage(ctx: PageContext, form: EditForm, refusal?: FormRefusal): string {
  const blocked = cannotAct(ctx, sourceEditHref(form.id), 'edit this source');
  const body = html`${refusalHtml(refusal)}
    ${
      refusal?.status === 412
        ? html`<p data-testid="reload">
            Your text is kept below: copy what you need, then <a href="${sourceEditHref(form.id)}">reload the source</a> and edit it again.
          </p>`
        : ''
    }
    <p>
      The whole source but its secrets (rotate them on the source's page) and its enabled flag. Saved only if nobody changed the source
      since revision <strong>${form.revision}</strong>.
    </p>
    ${
      blocked ??
      html`<form method="post" action="/sources/update" data-testid="edit-form">
        ${csrfField(ctx)}
        <input type="hidden" name="id" value="${form.id}" />
        <input type="hidden" name="revision" value="${form.revision}" />
        <label for="spec">source (JSON)</label>
        <textarea id="spec" name="spec" rows="24" spellcheck="false" class="code">${form.specText}</textarea>
        <button type="submit">Save</button>
        <a href="${sourceHref(form.id)}">Cancel</a>
      </form>`
    }`;
  return page(`Edit source ${form.id}`, ctx, body);
}

export function sourceMissingPage(ctx: PageContext, id: string): string {
  return page(
    'No such source',
    ctx,
    html`<p class="problem" role="alert" data-testid="refusal">There is no source <code>${id}</code>.</p>
      <p><a href="/sources">All sources</a></p>`,
  );
}
