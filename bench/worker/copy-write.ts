// The COPY ceiling's run: a plan (copy-plan.ts) written the fastest way Postgres takes rows in. Every
// chunk is one transaction of COPY FROM STDIN (text format) into the same migrated tables, with the
// same indexes, constraints and column defaults (ids, tx, now()), on as many connections sharing the
// lanes as the same-SQL ceiling's pool.
// COPY can only insert, and resource_state has one row per resource: a chunk's new versions of
// rows that exist are COPYed into a temporary table and written with one UPDATE ... FROM, the
// bulk way to replace rows (no key column changes, so heap-only updates where the page has room,
// as with the apply path's upsert).
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { STATE_ROWS } from '#domain/store/chunk.ts';
import { cpuSince, cpuSnapshot, type CpuSnapshot } from '../lib/cpu.ts';
import { ANOMALY_COLUMNS, INBOX_COLUMNS, OUTBOX_COLUMNS, STATE_COLUMNS, type CopyChunk, type CopyPlan } from './copy-plan.ts';

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

export const COPY_PHASES = ['begin', 'inbox', 'stateInsert', 'stateStage', 'stateUpdate', 'outbox', 'anomalies', 'commit'] as const;
export type CopyPhase = (typeof COPY_PHASES)[number];
export type Phases = Record<CopyPhase, number>;
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

export function backendCpuSeconds(pid: number): number {
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
