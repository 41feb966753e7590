// The COPY ceiling (issue 12): what Postgres on this machine absorbs for exactly the rows the apply
// path writes, written the fastest way Postgres takes rows in. The rows are decided and encoded
// before the clock starts (the same decisions as the apply path: decideOutcomes, the same row
// shapes as the store's chunk statement), then every chunk of the worker's batch size is one
// transaction of COPY FROM STDIN (text format) into the same migrated tables, with the same
// indexes, constraints and column defaults (ids, tx, now()), on as many connections sharing the
// lanes as the same-SQL ceiling's pool. What one chunk writes (shared/domain/store/chunk.ts, WRITE_CHUNK_EFFECTS):
// - inbox_events: one row per applied, stale, duplicate_version or idempotency-duplicate event (an
//   exact redelivery writes nothing);
// - resource_state: one row per resource applied in the chunk (its last applied version): an
//   insert the first time, else a new version of the existing row;
// - applied_outbox: one row per applied event, in apply order;
// - inbox_anomalies: one row per new (event id, body) mismatch (none in the benchmark's dataset).
// COPY can only insert, and resource_state has one row per resource: a chunk's new versions of
// rows that exist are COPYed into a temporary table and written with one UPDATE ... FROM, the
// bulk way to replace rows (no key column changes, so heap-only updates where the page has room,
// as with the apply path's upsert).
//
// Used by run.ts (runCopyCeiling per round, copyCeilingReport). On its own it compares, on the same
// prebuilt rows, the COPY ceiling with the store's statements one layer at a time, and checks that
// the COPY and the apply path leave the same rows:
//   npx tsx bench/worker/copy-ceiling.ts [resources=20000] [concurrency=3] [rounds=1]
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg, { type QueryConfig } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { eventAction, parseEvent, resourceKey } from '#domain/contract/index.ts';
import {
  chunkRows,
  decideOutcomes,
  SnapshotApplier,
  tenantScopedKey,
  type Decision,
  type KnownInboxRow,
  type KnownState,
} from '#domain/apply/index.ts';
import type { ParsedEvent, SourceRecord } from '#domain/apply/types.ts';
import { deliveryAttemptOf } from '#domain/apply/source-record.ts';
import {
  BEGIN_APPLY_TRANSACTION,
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
import { migrate } from '#domain/store/migrate.ts';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { cpuSince, cpuSnapshot, type CpuSnapshot } from '../lib/cpu.ts';
import { buildDataset } from './dataset.ts';

// --- the rows, as COPY text ---------------------------------------------------------------------

// The columns of the store's chunk statement (shared/domain/store/chunk.ts), in its order: the COPY
// writes the rows chunkRows builds for it into the same columns. An anomaly's original_body_sha256,
// which the statement reads in SQL from the inbox, is the one column the COPY adds.
const INBOX_COLUMNS = columnsOf(INBOX_ROWS);
const STATE_COLUMNS = columnsOf(STATE_ROWS);
const OUTBOX_COLUMNS = columnsOf(OUTBOX_ROWS);
type AnomalyCopyRow = AnomalyChunkRow & { original_body_sha256: string | null };
const ANOMALY_COLUMNS: (keyof AnomalyCopyRow & string)[] = [...columnsOf(ANOMALY_ROWS), 'original_body_sha256'];

function columnsOf<S extends ColumnSpec>(spec: S): (keyof RowOf<S> & string)[] {
  return Object.keys(spec) as (keyof RowOf<S> & string)[];
}

const COPY_INBOX = `COPY inbox_events (${INBOX_COLUMNS.join(', ')}) FROM STDIN`;
const COPY_STATE = `COPY resource_state (${STATE_COLUMNS.join(', ')}) FROM STDIN`;
const COPY_OUTBOX = `COPY applied_outbox (${OUTBOX_COLUMNS.join(', ')}) FROM STDIN`;
const COPY_ANOMALIES = `COPY inbox_anomalies (${ANOMALY_COLUMNS.join(', ')}) FROM STDIN`;
// The new versions of existing state rows: staged (data parsed into jsonb once, by the COPY), then
// one UPDATE per chunk. Emptied at every commit.
const CREATE_STATE_STAGE = `CREATE TEMP TABLE copy_state_stage (
  ${Object.entries(STATE_ROWS)
    .map(([name, encoder]) => `${name} ${encoder.type}`)
    .join(', ')}
) ON COMMIT DELETE ROWS`;
const COPY_STATE_STAGE = `COPY copy_state_stage (${STATE_COLUMNS.join(', ')}) FROM STDIN`;
const STATE_KEY: readonly string[] = ['tenant_id', 'resource_type', 'resource_id'];
// Every column but the key, as the apply path's upsert sets them.
const UPDATE_STATE_FROM_STAGE = `UPDATE resource_state AS s
  SET ${STATE_COLUMNS.filter((name) => !STATE_KEY.includes(name))
    .map((name) => `${name} = u.${name}`)
    .join(', ')}, updated_at = now()
  FROM copy_state_stage AS u
  WHERE s.tenant_id = u.tenant_id AND s.resource_type = u.resource_type AND s.resource_id = u.resource_id`;
// The stage has no statistics; a hash join would read all of resource_state per chunk. An index
// probe per staged row is what the upsert does, and the cheapest plan for a chunk's few hundred.
const BEGIN_COPY_TRANSACTION = 'BEGIN; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off';

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

// --- running it -----------------------------------------------------------------------------------

export const COPY_PHASES = ['begin', 'inbox', 'stateInsert', 'stateStage', 'stateUpdate', 'outbox', 'anomalies', 'commit'] as const;
export type CopyPhase = (typeof COPY_PHASES)[number];
type Phases = Record<CopyPhase, number>;
const noPhases = (): Phases => Object.fromEntries(COPY_PHASES.map((p) => [p, 0])) as Phases;

/** Writes `data` into a COPY FROM STDIN in 64 KiB slices; returns the rows the server counted. */
async function copyInto(client: pg.ClientBase, sql: string, data: Buffer): Promise<number> {
  const stream = client.query(copyFrom(sql));
  const slices = function* () {
    for (let at = 0; at < data.length; at += 65_536) yield data.subarray(at, at + 65_536);
  };
  await pipeline(Readable.from(slices()), stream);
  return stream.rowCount;
}

async function timed<T>(phases: Phases, phase: CopyPhase, run: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await run();
  } finally {
    phases[phase] += performance.now() - started;
  }
}

function expectRows(what: string, got: number, expected: number): void {
  if (got !== expected) throw new Error(`COPY ceiling: ${what} wrote ${got} rows, the plan has ${expected}`);
}

/** One chunk, one transaction, as the worker commits a chunk. */
async function copyChunk(client: pg.ClientBase, chunk: CopyChunk, phases: Phases): Promise<void> {
  await timed(phases, 'begin', () => client.query(BEGIN_COPY_TRANSACTION));
  try {
    const parts = [
      ['inbox', COPY_INBOX, chunk.inbox],
      ['stateInsert', COPY_STATE, chunk.stateInsert],
      ['stateStage', COPY_STATE_STAGE, chunk.stateUpdate],
      ['outbox', COPY_OUTBOX, chunk.outbox],
      ['anomalies', COPY_ANOMALIES, chunk.anomalies],
    ] as const;
    for (const [phase, sql, part] of parts) {
      if (part.rows === 0) continue;
      expectRows(phase, await timed(phases, phase, () => copyInto(client, sql, part.data)), part.rows);
      if (phase === 'stateStage') {
        const updated = await timed(phases, 'stateUpdate', () => client.query(UPDATE_STATE_FROM_STAGE));
        expectRows('stateUpdate', updated.rowCount ?? 0, part.rows);
      }
    }
    await timed(phases, 'commit', () => client.query('COMMIT'));
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/** The whole plan as one COPY text per table, and the state versions one layer (the k-th rewrite of a resource) each. */
interface AllAtOnce {
  inbox: Buffer;
  stateInsert: Buffer;
  stateLayers: Array<{ rows: number; data: Buffer }>;
  outbox: Buffer;
  anomalies: Buffer;
}

function allAtOnce(plan: CopyPlan): AllAtOnce {
  if (plan.stateLayers === undefined) throw new Error('COPY ceiling: one transaction of everything needs a plan with extras');
  const chunks = plan.lanes.flat();
  const concat = (f: (c: CopyChunk) => Buffer) => Buffer.concat(chunks.map(f));
  return {
    inbox: concat((c) => c.inbox.data),
    stateInsert: concat((c) => c.stateInsert.data),
    stateLayers: plan.stateLayers,
    outbox: concat((c) => c.outbox.data),
    anomalies: concat((c) => c.anomalies.data),
  };
}

/** Everything in one transaction, one COPY per table (the state versions a COPY and an UPDATE per layer). */
async function copyAllAtOnce(client: pg.ClientBase, plan: CopyPlan, all: AllAtOnce, phases: Phases): Promise<void> {
  await timed(phases, 'begin', () => client.query(BEGIN_COPY_TRANSACTION));
  expectRows('inbox', await timed(phases, 'inbox', () => copyInto(client, COPY_INBOX, all.inbox)), plan.rows.inbox);
  expectRows(
    'stateInsert',
    await timed(phases, 'stateInsert', () => copyInto(client, COPY_STATE, all.stateInsert)),
    plan.rows.stateInserts,
  );
  for (const layer of all.stateLayers) {
    await timed(phases, 'stateStage', () => copyInto(client, COPY_STATE_STAGE, layer.data));
    const updated = await timed(phases, 'stateUpdate', () => client.query(UPDATE_STATE_FROM_STAGE));
    expectRows('stateUpdate', updated.rowCount ?? 0, layer.rows);
    await timed(phases, 'stateUpdate', () => client.query('TRUNCATE copy_state_stage'));
  }
  expectRows('outbox', await timed(phases, 'outbox', () => copyInto(client, COPY_OUTBOX, all.outbox)), plan.rows.outbox);
  if (plan.rows.anomalies > 0) await timed(phases, 'anomalies', () => copyInto(client, COPY_ANOMALIES, all.anomalies));
  await timed(phases, 'commit', () => client.query('COMMIT'));
}

export interface CopyCeilingRound {
  ms: number;
  rate: number;
  cpu: CpuSnapshot;
  /** Postgres CPU of the benchmark's own backends (their /proc entries), seconds: independent of other load. */
  backendCpu: number;
  /** Statement time per phase summed over every chunk and lane, milliseconds. */
  phases: Phases;
  counts: { resources: number; inbox: number; outbox: number };
}

export interface CopyRunOptions {
  url: string;
  concurrency: number;
  /** One transaction and one COPY per table for the whole plan, on one connection. */
  allAtOnce?: boolean;
}

function backendCpuSeconds(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** The plan into a migrated database at `url`: lanes shared by `concurrency` connections, as the same-SQL ceiling. */
export async function runCopyCeiling(plan: CopyPlan, options: CopyRunOptions): Promise<CopyCeilingRound> {
  const connections = options.allAtOnce ? 1 : options.concurrency;
  const clients = await Promise.all(
    Array.from({ length: connections }, async () => {
      const client = new pg.Client({ connectionString: options.url, application_name: 'bench-copy-ceiling' });
      await client.connect();
      await client.query(CREATE_STATE_STAGE);
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      return { client, pid: rows[0]!.pid };
    }),
  );
  const phases = noPhases();
  const queue = [...plan.lanes];
  const all = options.allAtOnce ? allAtOnce(plan) : undefined;
  const backend0 = clients.reduce((s, c) => s + backendCpuSeconds(c.pid), 0);
  const cpuBefore = cpuSnapshot();
  const ownBefore = process.cpuUsage();
  const started = performance.now();
  if (all) await copyAllAtOnce(clients[0]!.client, plan, all, phases);
  else
    await Promise.all(
      clients.map(async ({ client }) => {
        for (let lane = queue.shift(); lane; lane = queue.shift()) for (const chunk of lane) await copyChunk(client, chunk, phases);
      }),
    );
  const ms = performance.now() - started;
  const own = process.cpuUsage(ownBefore);
  const cpu = { ...cpuSince(cpuBefore, cpuSnapshot()), child: (own.user + own.system) / 1e6 };
  const backendCpu = clients.reduce((s, c) => s + backendCpuSeconds(c.pid), 0) - backend0;
  const { rows } = await clients[0]!.client.query<CopyCeilingRound['counts']>(
    `SELECT (SELECT count(*)::int FROM resource_state) AS resources,
            (SELECT count(*)::int FROM inbox_events) AS inbox,
            (SELECT count(*)::int FROM applied_outbox) AS outbox`,
  );
  await Promise.all(clients.map(({ client }) => client.end()));
  return { ms, rate: plan.events / (ms / 1000), cpu, backendCpu, phases, counts: rows[0]! };
}

// --- the report section (run.ts) ------------------------------------------------------------------

interface RoundFigures {
  worker: { rate: number; consumedMs: number; cpu: CpuSnapshot | undefined };
  ceiling: { rate: number; ms: number; cpu: CpuSnapshot; counts: { resources: number; inbox: number; outbox: number } };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en');
const pct = (n: number) => `${(n * 100).toFixed(0)}%`;
const medianOf = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;

/** The COPY ceiling's part of bench/results/worker.md: per round, the median, CPU, the split of its time, and what stands between. */
export function copyCeilingReport(
  rounds: readonly RoundFigures[],
  copy: readonly CopyCeilingRound[],
  plan: CopyPlan,
  concurrency: number,
): string {
  const us = (seconds: number) => fmt((seconds / plan.events) * 1e6);
  const byRate = copy.map((c, i) => ({ c, i })).sort((a, b) => a.c.rate - b.c.rate);
  const { c: mid, i: midRound } = byRate[Math.floor((byRate.length - 1) / 2)]!;
  const sqlMid = rounds[midRound]!.ceiling;
  const workerMid = rounds[midRound]!.worker;
  const phaseTotal = COPY_PHASES.reduce((s, p) => s + mid.phases[p], 0);
  const phase = (p: CopyPhase) => `${pct(mid.phases[p] / phaseTotal)}`;
  const cpuRow = (name: string, c: CpuSnapshot | undefined, ms: number) =>
    c === undefined
      ? `| ${name} | n/a | n/a | n/a | n/a | n/a |`
      : `| ${name} | ${us(c.child)} | ${us(c.postgres)} | ${us(c.kafka)} | ${us(c.child + c.postgres + c.kafka)} | ${(((c.child + c.postgres + c.kafka) / (ms / 1000)) * 100).toFixed(0)}% |`;
  const cores = os.cpus().length;
  const total = (c: CpuSnapshot) => c.child + c.postgres + c.kafka;
  const cap = (c: CpuSnapshot | undefined) => (c === undefined ? 'n/a' : fmt(cores / (total(c) / plan.events)));
  const busy = (c: CpuSnapshot, ms: number) => pct(total(c) / (ms / 1000));
  const diff = (a: CpuSnapshot | undefined, b: CpuSnapshot, k: keyof CpuSnapshot) => {
    if (a === undefined) return 'n/a';
    const d = ((a[k] - b[k]) / plan.events) * 1e6;
    return `${d >= 0 ? '+' : '-'}${fmt(Math.abs(d))}`;
  };
  const equal = rounds.every((r, i) => JSON.stringify(r.ceiling.counts) === JSON.stringify(copy[i]!.counts));
  return `
COPY ceiling: the same rows each chunk of the apply path writes (decided and encoded before the clock starts, ${fmt(plan.buildMs)} ms
of node for all ${fmt(plan.events)} events), COPY FROM STDIN in text format into the same migrated tables (same indexes, constraints and
defaults), one transaction per chunk of the worker's batch size (${fmt(plan.lanes.flat()[0]?.events ?? 0)} events), ${concurrency} connections sharing the lanes as the
same-SQL ceiling does (bench/worker/copy-ceiling.ts): ${fmt(plan.rows.inbox)} inbox_events rows, ${fmt(plan.rows.outbox)} applied_outbox rows,
${fmt(plan.rows.stateInserts)} resource_state inserts and ${fmt(plan.rows.stateUpdates)} new versions of existing state rows (COPY into a temporary
table, then one UPDATE ... FROM per chunk: COPY cannot replace a row), ${fmt(plan.rows.anomalies)} inbox_anomalies rows; ${(plan.bytes / 2 ** 20).toFixed(0)} MiB of COPY text.
A third run in each round, after the worker and the same-SQL ceiling (fresh database):

| round | worker events/s | same-SQL ceiling events/s | COPY ceiling events/s | worker / same-SQL | worker / COPY | same-SQL / COPY |
|---|---:|---:|---:|---:|---:|---:|
${rounds
  .map((r, i) => {
    const c = copy[i]!;
    return `| ${i + 1} | ${fmt(r.worker.rate)} | ${fmt(r.ceiling.rate)} | ${fmt(c.rate)} | ${pct(r.worker.rate / r.ceiling.rate)} | ${pct(r.worker.rate / c.rate)} | ${pct(r.ceiling.rate / c.rate)} |`;
  })
  .join('\n')}

COPY ceiling, median round: **${fmt(mid.rate)} events/s** (${(mid.ms / 1000).toFixed(2)} s). Worker / COPY ceiling: **${pct(medianOf(rounds.map((r, i) => r.worker.rate / copy[i]!.rate)))}**, the median of
the rounds' ratios (worker / same-SQL ceiling ${pct(medianOf(rounds.map((r) => r.worker.rate / r.ceiling.rate)))}, same-SQL / COPY ${pct(medianOf(rounds.map((r, i) => r.ceiling.rate / copy[i]!.rate)))}).

CPU per event in the median COPY round and the same round's other two runs (/proc), in microseconds:
| run | node process | Postgres (all backends) | Kafka broker | total | cores busy (of 200%) |
|---|---|---|---|---|---|
${cpuRow(`worker (round ${midRound + 1})`, workerMid.cpu, workerMid.consumedMs)}
${cpuRow(`same-SQL ceiling (round ${midRound + 1})`, sqlMid.cpu, sqlMid.ms)}
${cpuRow(`COPY ceiling (round ${midRound + 1}; rows prebuilt)`, mid.cpu, mid.ms)}

COPY ceiling's own backends: ${us(mid.backendCpu)} us of Postgres CPU per event. Its statement time (summed over chunks and connections):
inbox COPY ${phase('inbox')}, outbox COPY ${phase('outbox')}, state inserts ${phase('stateInsert')}, staging the new state versions
${phase('stateStage')} and their UPDATE ${phase('stateUpdate')}, BEGIN ${phase('begin')}, COMMIT (WAL flush) ${phase('commit')}.
Rows: COPY ceiling ${JSON.stringify(mid.counts)}; ${equal ? 'equal to the same-SQL ceiling in every round' : '**NOT equal to the same-SQL ceiling in every round**'}.

What stands between the worker and the COPY ceiling, per event from the CPU table above (at ${cores} cores, the CPU each
event takes caps the rate at worker ${cap(workerMid.cpu)}/s, same-SQL ceiling ${cap(sqlMid.cpu)}/s, COPY ceiling ${cap(mid.cpu)}/s):
- same-SQL -> COPY: ${diff(sqlMid.cpu, mid.cpu, 'child')} us of node CPU (the apply path parses, decides and encodes on the clock;
  the COPY ceiling did that beforehand, ${us(plan.buildMs / 1000)} us per event) and ${diff(sqlMid.cpu, mid.cpu, 'postgres')} us of Postgres CPU (the store's
  statements instead of COPY: key locks, the read, unnest and packed-bytea decoding, the ON CONFLICT upserts and their
  version check; \`npx tsx bench/worker/copy-ceiling.ts\` splits it statement by statement);
- worker -> same-SQL: ${diff(workerMid.cpu, sqlMid.cpu, 'child')} us of node CPU in the worker process (Kafka fetch decoding and offset commits, the
  relay publishing every applied record, a pino line per event), ${diff(workerMid.cpu, sqlMid.cpu, 'kafka')} us of broker CPU and
  Postgres CPU ${diff(workerMid.cpu, sqlMid.cpu, 'postgres')} us (the worker's run adds the relay's reads and cursor rows; within noise when near 0).
Our processes kept ${[workerMid.cpu && busy(workerMid.cpu, workerMid.consumedMs), busy(sqlMid.cpu, sqlMid.ms), busy(mid.cpu, mid.ms)].map((b) => b ?? 'n/a').join(' / ')} of ${cores * 100}% busy
in those three runs; well below ${cores * 100}%, other processes on the machine had the rest.
`;
}

// --- on its own: the COPY ceiling against the store's statements, one layer at a time -------------

async function main(): Promise<void> {
  const resources = Number(process.argv[2] ?? 20_000);
  const concurrency = Number(process.argv[3] ?? 3);
  const rounds = Number(process.argv[4] ?? 1);
  const batchSize = Number(process.env.BENCH_BATCH_SIZE ?? 1000);
  const partitions = 12;
  const postgres = await resolvePostgres((line) => console.error(line));
  const stamp = Date.now().toString(36);
  const admin = new pg.Client({ connectionString: postgres.adminUrl });
  await admin.connect();
  const created: string[] = [];
  const fresh = async (name: string) => {
    const database = `bench_copy_${stamp}_${name}`;
    await admin.query(`CREATE DATABASE ${database}`);
    created.push(database);
    const url = withDatabase(postgres.adminUrl, database);
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    await migrate(pool);
    await pool.end();
    return url;
  };
  try {
    const now = String(Date.now());
    const perPartition: SourceRecord[][] = Array.from({ length: partitions }, () => []);
    for (const e of buildDataset(resources).events) {
      const partition = partitionForKey(e.key, partitions);
      const list = perPartition[partition]!;
      list.push({
        topic: 'bench.copy',
        partition,
        offset: String(list.length),
        key: e.key,
        value: Buffer.from(e.value),
        timestamp: now,
        headers: {},
      });
    }
    const lanes = perPartition.map((records) => {
      const chunks: SourceRecord[][] = [];
      for (let i = 0; i < records.length; i += batchSize) chunks.push(records.slice(i, i + batchSize));
      return chunks;
    });
    const plan = await planCopyCeiling(lanes, { extras: true });
    console.error(`planned ${plan.events} events in ${plan.buildMs.toFixed(0)} ms: ${JSON.stringify(plan.rows)}`);

    // The same rows through the store's statements, one layer at a time (pool clients' backends are measured).
    type Layer = 'write' | 'lock+write' | 'lock+read+write' | 'apply path';
    const storeRun = async (layer: Layer, url: string) => {
      // No idle timeout: a backend that exits takes its CPU figure with it.
      const pool = new pg.Pool({ connectionString: url, max: concurrency, idleTimeoutMillis: 0, application_name: 'bench-copy-layers' });
      const pids = new Set<number>();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          const c = await pool.connect();
          pids.add((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
          return c;
        }),
      ).then((cs) => cs.forEach((c) => c.release()));
      const applier = new SnapshotApplier({ pool });
      const backend0 = [...pids].reduce((s, p) => s + backendCpuSeconds(p), 0);
      const cpuBefore = cpuSnapshot();
      const ownBefore = process.cpuUsage();
      const started = performance.now();
      const queue = lanes.map((chunks, i) => ({ chunks, planned: plan.lanes[i]! }));
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let next = queue.shift(); next; next = queue.shift()) {
            for (let i = 0; i < next.chunks.length; i += 1) {
              const chunk = next.planned[i]!;
              if (layer === 'apply path') {
                await applier.applyBatch(next.chunks[i]!);
                continue;
              }
              const client = await pool.connect();
              try {
                // The store's statements as the applier sends them, parameters encoded beforehand.
                const { lock, read, write } = chunk.statements!;
                // BEGIN alone, or BEGIN with the key locks in one round trip (as the applier sends them).
                await client.query(layer === 'write' ? BEGIN_APPLY_TRANSACTION : lock);
                if (layer === 'lock+read+write') await client.query(read);
                await client.query(write);
                await client.query('COMMIT');
              } finally {
                client.release();
              }
            }
          }
        }),
      );
      const ms = performance.now() - started;
      const own = process.cpuUsage(ownBefore);
      const cpu = { ...cpuSince(cpuBefore, cpuSnapshot()), child: (own.user + own.system) / 1e6 };
      const backendCpu = [...pids].reduce((s, p) => s + backendCpuSeconds(p), 0) - backend0;
      await pool.end();
      return { ms, rate: plan.events / (ms / 1000), cpu, backendCpu };
    };

    // Every run must leave the same rows (apart from ids, transaction ids, times and applied_at).
    const digestOf = async (url: string) => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      const { rows } = await c.query<Record<string, string | number>>(`SELECT
        (SELECT md5(string_agg((tenant_id, event_id, idempotency_key, duplicate_of, resource_type, resource_id, resource_version,
           event_type, status, reason, attempts, last_error, body_sha256, payload, source_topic, source_partition, source_offset,
           occurred_at, received_at, delivery_attempt, source, reconcile_trigger, fingerprint, trace_id)::text, E'\\n' ORDER BY tenant_id, event_id))
         FROM inbox_events) AS inbox,
        (SELECT md5(string_agg((tenant_id, resource_type, resource_id, version, deleted, data, last_event_id)::text, E'\\n'
           ORDER BY tenant_id, resource_type, resource_id)) FROM resource_state) AS state,
        (SELECT md5(string_agg((event_id, key, source_topic, source_partition, source_offset,
           regexp_replace(payload, '"applied_at":"[^"]*"', ''), traceparent, tracestate)::text, E'\\n' ORDER BY key, id))
         FROM applied_outbox) AS outbox,
        (SELECT count(*)::int FROM inbox_anomalies) AS anomalies,
        (SELECT count(*)::int FROM inbox_events) AS inbox_rows,
        (SELECT count(*)::int FROM resource_state) AS state_rows,
        (SELECT count(*)::int FROM applied_outbox) AS outbox_rows`);
      await c.end();
      return JSON.stringify(rows[0]);
    };

    type Result = { ms: number; rate: number; cpu: CpuSnapshot; backendCpu: number; phases?: Phases };
    // BENCH_COPY_RUNS=copy,write picks some of them (ids below); the apply path always runs last, as the reference.
    const picked = process.env.BENCH_COPY_RUNS?.split(',');
    const runs = (
      [
        ['copy', 'COPY, one transaction per chunk', (url) => runCopyCeiling(plan, { url, concurrency })],
        [
          'copy-all',
          'COPY, everything in one transaction (one connection)',
          (url) => runCopyCeiling(plan, { url, concurrency, allAtOnce: true }),
        ],
        ['write', 'store write statement only (parameters prebuilt)', (url) => storeRun('write', url)],
        ['lock-write', '+ the key locks (parameters prebuilt)', (url) => storeRun('lock+write', url)],
        ['lock-read-write', '+ the read (parameters prebuilt)', (url) => storeRun('lock+read+write', url)],
        ['apply', 'apply path (parse, decide, encode, same SQL)', (url) => storeRun('apply path', url)],
      ] as Array<[string, string, (url: string) => Promise<Result>]>
    )
      .filter(([id]) => picked === undefined || picked.includes(id) || id === 'apply')
      .map(([, name, run]) => [name, run] as const);
    const results: Array<Result & { run: string; round: number; digest: string }> = [];
    for (let round = 1; round <= rounds; round += 1) {
      for (const [name, run] of runs) {
        const url = await fresh(`${round}_${results.length}`);
        // No dirty pages of an earlier run are left for this one's backends to write out.
        await admin.query('CHECKPOINT');
        console.error(`round ${round}: ${name}`);
        const result = await run(url);
        results.push({ run: name, round, digest: await digestOf(url), ...result });
        if (process.env.BENCH_KEEP !== '1') await admin.query(`DROP DATABASE IF EXISTS ${created.pop()!} WITH (FORCE)`);
      }
    }
    const reference = results.at(-1)!.digest;
    const us = (s: number) => ((s / plan.events) * 1e6).toFixed(1);
    console.log(`${plan.events} events, ${concurrency} connections, chunks of ${batchSize}, ${rounds} round(s); CPU in us per event`);
    console.log('| round | run | events/s | Postgres, own backends | Postgres, all | node | rows equal to the apply path |');
    console.log('|---|---|---:|---:|---:|---:|---|');
    for (const r of results) {
      const same = r.digest === reference ? 'yes' : 'NO';
      console.log(
        `| ${r.round} | ${r.run} | ${fmt(r.rate)} | ${us(r.backendCpu)} | ${us(r.cpu.postgres)} | ${us(r.cpu.child)} | ${same} |`,
      );
    }
    for (const r of results.filter((x) => x.phases !== undefined)) {
      const total = COPY_PHASES.reduce((sum, p) => sum + r.phases![p], 0);
      console.log(`round ${r.round}, ${r.run}: ${COPY_PHASES.map((p) => `${p} ${pct(r.phases![p] / total)}`).join(', ')}`);
    }
    console.log(`node time to plan (parse, decide, encode) outside the COPY runs' clock: ${us(plan.buildMs / 1000)} us per event`);
  } finally {
    if (process.env.BENCH_KEEP !== '1') for (const d of created) await admin.query(`DROP DATABASE IF EXISTS ${d} WITH (FORCE)`);
    await admin.end();
    await postgres.stop();
  }
}

// By the entry's name, not import.meta.filename: bundled into bench:worker's run.mjs, this module's
// import.meta.filename is the bundle's, which is then also argv[1].
if (/[\\/]copy-ceiling\.(ts|mjs)$/.test(process.argv[1] ?? '')) await main();
