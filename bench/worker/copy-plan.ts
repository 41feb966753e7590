// The COPY ceiling's rows: exactly what the apply path writes, decided and encoded before the clock
// starts (the same decisions as the apply path: decideOutcomes, the same row shapes as the store's
// chunk statement), as COPY text per chunk of the worker's batch size. What one chunk writes
// (shared/domain/store/chunk.ts, WRITE_CHUNK_EFFECTS):
// - inbox_events: one row per applied, stale, duplicate_version or idempotency-duplicate event (an
//   exact redelivery writes nothing);
// - resource_state: one row per resource applied in the chunk (its last applied version): an
//   insert the first time, else a new version of the existing row;
// - applied_outbox: one row per applied event, in apply order;
// - inbox_anomalies: one row per new (event id, body) mismatch (none in the benchmark's dataset).
import type { QueryConfig } from 'pg';
import { eventAction, parseEvent, resourceKey } from '#domain/contract/index.ts';
import { chunkRows, decideOutcomes, tenantScopedKey, type Decision, type KnownInboxRow, type KnownState } from '#domain/apply/index.ts';
import type { ParsedEvent, SourceRecord } from '#domain/apply/types.ts';
import { deliveryAttemptOf } from '#domain/apply/source-record.ts';
import {
  beginApplyAndLock,
  ANOMALY_ROWS,
  INBOX_ROWS,
  OUTBOX_ROWS,
  readChunkContext,
  STATE_ROWS,
  writeChunkEffects,
  type AnomalyChunkRow,
  type ChunkEffects,
  type ChunkKeys,
} from '#domain/store/chunk.ts';
import type { ColumnSpec, RowOf } from '#domain/store/columns.ts';
import type { Queryable } from '#domain/store/session.ts';

// --- the rows, as COPY text ---------------------------------------------------------------------

// The columns of the store's chunk statement (shared/domain/store/chunk.ts), in its order: the COPY
// writes the rows chunkRows builds for it into the same columns. An anomaly's original_body_sha256,
// which the statement reads in SQL from the inbox, is the one column the COPY adds.
export const INBOX_COLUMNS = columnsOf(INBOX_ROWS);
export const STATE_COLUMNS = columnsOf(STATE_ROWS);
export const OUTBOX_COLUMNS = columnsOf(OUTBOX_ROWS);
type AnomalyCopyRow = AnomalyChunkRow & { original_body_sha256: string | null };
export const ANOMALY_COLUMNS: (keyof AnomalyCopyRow & string)[] = [...columnsOf(ANOMALY_ROWS), 'original_body_sha256'];

function columnsOf<S extends ColumnSpec>(spec: S): (keyof RowOf<S> & string)[] {
  return Object.keys(spec) as (keyof RowOf<S> & string)[];
}

// Text format: a tab between columns, \N for NULL, and backslash, newline, carriage return and tab
// escaped with a backslash (https://www.postgresql.org/docs/15/sql-copy.html#id-1.9.3.55.9.2).
const COPY_SPECIAL = /[\\\n\r\t]/;
const COPY_SPECIAL_ALL = /[\\\n\r\t]/g;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** One value in COPY's text format. Numbers, ISO times and JSON text are what the column's input function reads. */
export function copyField(value: string | number | boolean | Buffer | null | undefined): string {
  if (value === null || value === undefined) return '\\N';
  if (typeof value === 'boolean') return value ? 't' : 'f';
  const text = typeof value === 'string' ? value : Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
  return COPY_SPECIAL.test(text) ? text.replace(COPY_SPECIAL_ALL, (c) => COPY_ESCAPES[c]!) : text;
}

function copyLine<Row>(columns: readonly (keyof Row & string)[], row: Row): string {
  let line = '';
  for (let i = 0; i < columns.length; i += 1) {
    if (i > 0) line += '\t';
    line += copyField(row[columns[i]!] as string | number | boolean | Buffer | null | undefined);
  }
  return `${line}\n`;
}

// --- the plan: every chunk's rows, decided and encoded before the clock starts ------------------

/** One chunk of the apply path, its rows as COPY text. Buffers only: a plan in the V8 heap as row
 * objects (hundreds of MB live) made every major GC of the benchmark process mark it, which slowed
 * the same-SQL ceiling running beside it (--trace-gc shows it). */
export interface CopyChunk {
  events: number;
  inbox: { rows: number; data: Buffer };
  stateInsert: { rows: number; data: Buffer };
  stateUpdate: { rows: number; data: Buffer };
  outbox: { rows: number; data: Buffer };
  anomalies: { rows: number; data: Buffer };
  /** The store's own statements for the same chunk, parameters encoded (only with `extras`); lock is BEGIN with the key locks. */
  statements?: { lock: string; read: QueryConfig; write: QueryConfig };
}

export interface CopyPlan {
  /** Per lane (source partition), its chunks in offset order. */
  lanes: CopyChunk[][];
  events: number;
  rows: { inbox: number; stateInserts: number; stateUpdates: number; outbox: number; anomalies: number };
  bytes: number;
  /** Node time to parse, decide and encode every chunk (outside the clock of a COPY round). */
  buildMs: number;
  /** The state versions by layer (the k-th rewrite of each resource), for one transaction of everything (only with `extras`). */
  stateLayers?: Array<{ rows: number; data: Buffer }>;
}

interface Known {
  inbox: Map<string, KnownInboxRow>;
  idempotency: Map<string, string>;
  states: Map<string, KnownState>;
  /** How many state rows each resource has had written (0: none yet, the next is an insert). */
  stateWrites: Map<string, number>;
  anomalies: Set<string>;
  /** With `extras`: the state versions' COPY lines by layer. */
  layers?: Map<number, string[]>;
}

export interface PlanOptions {
  appliedAt?: Date;
  /** Also capture the store's statements per chunk and the state layers (the standalone comparison). */
  extras?: boolean;
}

/**
 * Decides every chunk as the apply path would, in lane order: lanes never share a resource (a key
 * has one partition), so what one lane decides never depends on another.
 */
export async function planCopyCeiling(
  lanes: readonly (readonly (readonly SourceRecord[])[])[],
  options: PlanOptions = {},
): Promise<CopyPlan> {
  const started = performance.now();
  const known: Known = { inbox: new Map(), idempotency: new Map(), states: new Map(), stateWrites: new Map(), anomalies: new Set() };
  if (options.extras) known.layers = new Map();
  const appliedAtIso = (options.appliedAt ?? new Date()).toISOString();
  const planned: CopyChunk[][] = [];
  for (const chunks of lanes) {
    const lane: CopyChunk[] = [];
    for (const records of chunks) lane.push(await planChunk(records, known, appliedAtIso, options.extras === true));
    planned.push(lane);
  }
  const all = planned.flat();
  const sum = (f: (c: CopyChunk) => number) => all.reduce((s, c) => s + f(c), 0);
  return {
    lanes: planned,
    events: sum((c) => c.events),
    rows: {
      inbox: sum((c) => c.inbox.rows),
      stateInserts: sum((c) => c.stateInsert.rows),
      stateUpdates: sum((c) => c.stateUpdate.rows),
      outbox: sum((c) => c.outbox.rows),
      anomalies: sum((c) => c.anomalies.rows),
    },
    bytes: sum(
      (c) => c.inbox.data.length + c.stateInsert.data.length + c.stateUpdate.data.length + c.outbox.data.length + c.anomalies.data.length,
    ),
    buildMs: performance.now() - started,
    ...(known.layers && {
      stateLayers: [...known.layers]
        .sort(([a], [b]) => a - b)
        .map(([, lines]) => ({ rows: lines.length, data: Buffer.from(lines.join(''), 'utf8') })),
    }),
  };
}

/** The statement a store function sends (it sends one), captured instead of sent. */
async function captured(run: (client: Queryable) => Promise<unknown>): Promise<QueryConfig> {
  let config: QueryConfig | undefined;
  const client = {
    query: async (c: QueryConfig) => {
      config = c;
      return { rows: [{}], rowCount: 0 };
    },
  } as unknown as Queryable;
  await run(client);
  return config!;
}

/** As snapshot-applier.ts's parseRecord (invalid records write nothing and are left out). */
function parsed(record: SourceRecord): ParsedEvent | undefined {
  const bytes = record.value ?? Buffer.alloc(0);
  const result = parseEvent(bytes);
  if (!result.ok) return undefined;
  const { envelope } = result;
  return {
    record,
    envelope,
    bodySha256: result.bodySha256,
    bytes,
    deliveryAttempt: deliveryAttemptOf(record, envelope),
    resourceKey: resourceKey(envelope),
    action: eventAction(envelope),
    orderedBy: 'version',
  };
}

/** The rows of one chunk: the apply path's own (chunkRows), from the same decisions. */
async function planChunk(records: readonly SourceRecord[], known: Known, appliedAtIso: string, extras: boolean): Promise<CopyChunk> {
  const events = records.flatMap((r) => parsed(r) ?? []);
  // An anomaly's original_body_sha256 is read in SQL from the inbox as it was before the chunk's statement.
  const storedSha = new Map(
    events.map((e) => [e, known.inbox.get(tenantScopedKey(e.envelope.tenant_id, e.envelope.event_id))?.bodySha256]),
  );
  const decisions = decideOutcomes(events, known.inbox, known.idempotency, known.states);
  const rows = chunkRows(decisions, { appliedAtIso });
  const { inbox, outbox } = rows;
  // chunkRows keeps decision order: its anomaly rows are the quarantined decisions', its state rows
  // the last applied decision's of each resource, in first-applied order.
  const quarantined = decisions.filter((d) => d.outcome === 'quarantined');
  const lastApplied = new Map<string, Decision>();
  for (const d of decisions) if (d.outcome === 'applied') lastApplied.set(d.event.resourceKey, d);
  // ON CONFLICT (tenant_id, event_id, body_sha256) DO NOTHING: a mismatch already kept writes nothing.
  const anomalies: AnomalyCopyRow[] = rows.anomalies.flatMap((row, i) => {
    const d = quarantined[i]!;
    const key = tenantScopedKey(d.event.envelope.tenant_id, `${d.event.envelope.event_id}\u0000${d.event.bodySha256}`);
    if (known.anomalies.has(key)) return [];
    known.anomalies.add(key);
    return [{ ...row, original_body_sha256: storedSha.get(d.event) ?? null }];
  });

  // The first state row of a resource is an insert; every later one a new version of that row.
  const state = rows.state;
  let stateInsert = '';
  let stateInserts = 0;
  const updateLines: string[] = [];
  for (const [i, key] of [...lastApplied.keys()].entries()) {
    const row = state[i]!;
    const writes = known.stateWrites.get(key) ?? 0;
    known.stateWrites.set(key, writes + 1);
    if (writes === 0) {
      stateInsert += copyLine(STATE_COLUMNS, row);
      stateInserts += 1;
    } else {
      const line = copyLine(STATE_COLUMNS, row);
      updateLines.push(line);
      if (known.layers) {
        const layer = known.layers.get(writes) ?? [];
        layer.push(line);
        known.layers.set(writes, layer);
      }
    }
  }
  const text = <Row>(columns: readonly (keyof Row & string)[], rows: readonly Row[]) =>
    Buffer.from(rows.map((r) => copyLine(columns, r)).join(''), 'utf8');
  const chunk: CopyChunk = {
    events: records.length,
    inbox: { rows: inbox.length, data: text(INBOX_COLUMNS, inbox) },
    stateInsert: { rows: stateInserts, data: Buffer.from(stateInsert, 'utf8') },
    stateUpdate: { rows: updateLines.length, data: Buffer.from(updateLines.join(''), 'utf8') },
    outbox: { rows: outbox.length, data: text(OUTBOX_COLUMNS, outbox) },
    anomalies: { rows: anomalies.length, data: text(ANOMALY_COLUMNS, anomalies) },
  };
  if (!extras) return chunk;
  // The keys as SnapshotApplier passes them to the lock and the read.
  const keys: ChunkKeys = {
    events: [...new Map(events.map((e) => [tenantScopedKey(e.envelope.tenant_id, e.envelope.event_id), e.envelope])).values()].map((e) => ({
      tenant_id: e.tenant_id,
      event_id: e.event_id,
    })),
    idempotencyKeys: events
      .filter((e) => e.envelope.idempotency_key !== undefined)
      .map((e) => ({ tenant_id: e.envelope.tenant_id, idempotency_key: e.envelope.idempotency_key! })),
    resources: [...new Map(events.map((e) => [e.resourceKey, e.envelope])).values()].map((e) => ({
      tenant_id: e.tenant_id,
      resource_type: e.resource.type,
      resource_id: e.resource.id,
    })),
  };
  const effects: ChunkEffects = { inbox, state, outbox, anomalies };
  chunk.statements = {
    lock: beginApplyAndLock([...new Set(events.map((e) => e.resourceKey))]),
    read: await captured((c) => readChunkContext(c, keys)),
    write: await captured((c) => writeChunkEffects(c, effects)),
  };
  return chunk;
}
