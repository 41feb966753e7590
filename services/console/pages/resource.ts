import { traceIdOf } from '#domain/contract/event-headers.ts';
import { diffSnapshots } from '../diff.ts';
import { html, query } from '../html.ts';
import type { ResourceView } from '../readers.ts';
import type { ResourceTrace } from '#domain/operations/trace.ts';
import { page, problems, type PageContext } from './layout.ts';
import { reconcileSection, type ReconcileAvailability } from './reconcile.ts';

export interface ResourceQuery {
  tenant: string;
  type: string;
  id: string;
  /** Applied-record ids (applied_outbox.id) to diff. */
  a?: string | undefined;
  b?: string | undefined;
}

function resourceForm(q: Partial<ResourceQuery>) {
  return html`<form method="get" action="/resource" class="fields">
    <label>tenant <input name="tenant" value="${q.tenant ?? ''}" required /></label>
    <label>type <input name="type" value="${q.type ?? 'theme'}" required /></label>
    <label>id <input name="id" value="${q.id ?? ''}" required /></label>
    <button type="submit">Show</button>
  </form>`;
}

function dataOf(payload: string): unknown {
  try {
    return (JSON.parse(payload) as { data?: unknown }).data ?? null;
  } catch {
    return null;
  }
}

/** A W3C trace id (32 hex), to look up in the tracing backend; empty when the event had no trace. */
function traceCell(traceId: string | null | undefined) {
  return traceId ? html`<code>${traceId}</code>` : '';
}

/** Deliveries of an event id already seen with other content: each has an anomaly row, not an inbox row. */
function anomaliesSection(anomalies: ResourceTrace['anomalies']) {
  return html`<section aria-labelledby="anomalies-h">
    <h2 id="anomalies-h">Anomalies (${anomalies.length}: same event id, different content)</h2>
    <div class="scroll" tabindex="0">
      <table data-testid="anomalies">
        <thead>
          <tr>
            <th scope="col">detected</th>
            <th scope="col">event id</th>
            <th scope="col">version</th>
            <th scope="col">status</th>
            <th scope="col">kafka</th>
            <th scope="col">trace id</th>
          </tr>
        </thead>
        <tbody>
          ${anomalies.map(
            (a) =>
              html`<tr data-anomaly-event-id="${a.event_id}">
                <td>${a.detected_at}</td>
                <td><code>${a.event_id}</code></td>
                <td data-col="version">${a.version}</td>
                <td><span class="status status-${a.status}">${a.status}</span></td>
                <td data-col="kafka">${a.kafka ? `${a.kafka.topic}/${a.kafka.partition}@${a.kafka.offset}` : ''}</td>
                <td data-col="trace">${traceCell(a.trace_id)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>
  </section>`;
}

export function resourcePage(
  ctx: PageContext,
  q: Partial<ResourceQuery>,
  view: ResourceView | undefined,
  reconcile?: ReconcileAvailability,
): string {
  if (!view || !q.tenant || !q.type || !q.id) return page('Resource', ctx, resourceForm(q));
  const { trace, applied } = view;
  const key = `${q.tenant}/${q.type}/${q.id}`;
  const records = applied.ok ? applied.value : [];
  const a = records.find((r) => r.id === q.a) ?? records[1];
  const b = records.find((r) => r.id === q.b) ?? records[0];
  const diff = a && b ? diffSnapshots(dataOf(a.payload), dataOf(b.payload)) : [];
  const option = (selected: string | undefined) =>
    records.map(
      (r) =>
        html`<option value="${r.id}" ${r.id === selected ? html`selected` : ''}>
          #${r.id} ${r.event_id} (${r.created_at.toISOString()})
        </option>`,
    );
  const body = html` ${resourceForm(q)} ${problems([trace.ok ? undefined : trace.problem, applied.ok ? undefined : applied.problem])}
    ${reconcile ? reconcileSection(ctx, { tenant: q.tenant, type: q.type, id: q.id }, reconcile) : ''}
    ${trace.ok && !trace.value.known ? html`<p role="status">Nothing known about <code>${key}</code>: no state and no events.</p>` : ''}
    ${
      trace.ok && trace.value.known
        ? html` <section aria-labelledby="state-h">
              <h2 id="state-h">State now</h2>
              ${
                trace.value.state
                  ? html`<p data-testid="state-version">
                        ${
                          trace.value.state.ordered_by === 'occurred_at'
                            ? html`ordered by <strong>occurred_at</strong>: <strong>${trace.value.state.last_occurred_at}</strong> (a later
                                occurred_at applies; the same instant or earlier is stale), version ${trace.value.state.version ?? 'none'}`
                            : html`version <strong>${trace.value.state.version}</strong>`
                        }${trace.value.state.deleted ? ' (deleted: tombstone)' : ''},
                        last event <code>${trace.value.state.last_event_id}</code>, updated ${trace.value.state.updated_at}
                      </p>
                      <pre tabindex="0">${JSON.stringify(trace.value.state.data, null, 2)}</pre>`
                  : html`<p>No state row.</p>`
              }
            </section>
            <section aria-labelledby="timeline-h">
              <h2 id="timeline-h">Timeline (${trace.value.events.length} events, newest first)</h2>
              <div class="scroll" tabindex="0">
                <table data-testid="timeline">
                  <thead>
                    <tr>
                      <th scope="col">received</th>
                      <th scope="col">event id</th>
                      <th scope="col">type</th>
                      <th scope="col">version</th>
                      <th scope="col">occurred at</th>
                      <th scope="col">status</th>
                      <th scope="col">from</th>
                      <th scope="col">reason</th>
                      <th scope="col">attempts</th>
                      <th scope="col">kafka</th>
                      <th scope="col">settled</th>
                      <th scope="col">trace id</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${trace.value.events.map(
                      (e) =>
                        html`<tr data-event-id="${e.event_id}">
                          <td>${e.received_at ?? e.first_seen_at}</td>
                          <td><code>${e.event_id}</code></td>
                          <td data-col="type">${e.event_type}</td>
                          <td data-col="version">${e.version}</td>
                          <td data-col="occurred">${e.occurred_at}</td>
                          <td data-col="status"><span class="status status-${e.status}">${e.status}</span></td>
                          <td data-col="from">${e.reconcile_trigger ? `${e.source ?? 'reconcile'} (${e.reconcile_trigger})` : e.source}</td>
                          <td>
                            ${e.duplicate_of ? html`${e.reason ?? ''} of <code>${e.duplicate_of}</code>` : (e.reason ?? e.last_error)}
                          </td>
                          <td data-col="attempts">${e.attempts}</td>
                          <td data-col="kafka">${e.kafka ? `${e.kafka.topic}/${e.kafka.partition}@${e.kafka.offset}` : ''}</td>
                          <td>${e.updated_at}</td>
                          <td data-col="trace">${traceCell(e.trace_id)}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>
            </section>
            ${trace.value.anomalies.length > 0 ? anomaliesSection(trace.value.anomalies) : ''}`
        : ''
    }
    ${
      applied.ok && records.length > 0
        ? html`<section aria-labelledby="diff-h">
              <h2 id="diff-h">Diff between two applied snapshots</h2>
              <form method="get" action="/resource" class="fields">
                <input type="hidden" name="tenant" value="${q.tenant}" /><input type="hidden" name="type" value="${q.type}" />
                <input type="hidden" name="id" value="${q.id}" />
                <label
                  >from
                  <select name="a">
                    ${option(a?.id)}
                  </select></label
                >
                <label
                  >to
                  <select name="b">
                    ${option(b?.id)}
                  </select></label
                >
                <button type="submit">Compare</button>
              </form>
              ${
                a && b
                  ? diff.length === 0
                    ? html`<p>No difference in <code>data</code>.</p>`
                    : html`<table data-testid="diff">
                        <thead>
                          <tr>
                            <th scope="col">path</th>
                            <th scope="col">change</th>
                            <th scope="col">from #${a.id}</th>
                            <th scope="col">to #${b.id}</th>
                          </tr>
                        </thead>
                        <tbody>
                          ${diff.map(
                            (d) =>
                              html`<tr class="diff-${d.kind}">
                                <td><code>${d.path}</code></td>
                                <td>${d.kind}</td>
                                <td>${d.before ?? ''}</td>
                                <td>${d.after ?? ''}</td>
                              </tr>`,
                          )}
                        </tbody>
                      </table>`
                  : html`<p>One applied snapshot only.</p>`
              }
            </section>
            <section aria-labelledby="applied-h">
              <h2 id="applied-h">Records on the applied topic (${records.length})</h2>
              <div class="scroll" tabindex="0">
                <table data-testid="applied">
                  <thead>
                    <tr>
                      <th scope="col">#</th>
                      <th scope="col">event id</th>
                      <th scope="col">applied</th>
                      <th scope="col">published</th>
                      <th scope="col">trace id</th>
                      <th scope="col">value</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${records.map(
                      (r) =>
                        html`<tr>
                          <td>${r.id}</td>
                          <td><code>${r.event_id}</code></td>
                          <td>${r.created_at.toISOString()}</td>
                          <td>${r.published_at ? r.published_at.toISOString() : 'not yet'}</td>
                          <td data-col="trace">${traceCell(traceIdOf(r.traceparent))}</td>
                          <td>
                            <details>
                              <summary>value</summary>
                              <pre>${r.payload}</pre>
                            </details>
                          </td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>
            </section>`
        : ''
    }
    <p><a href="/search${query({ q: key })}">Search for ${key}</a></p>`;
  return page(`Resource ${key}`, ctx, body);
}
