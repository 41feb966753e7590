// Postgres CPU per event of the apply path and of the outbox relay, read from the backend's own
// /proc entry (user + system time), so the figure does not depend on what else the machine is
// doing. One connection, the benchmark's dataset, chunks of the worker's batch size.
// Usage: npx tsx bench/worker/pg-cpu.ts [resources=5000] [chunkSize=1000] [singlesFirst=0]
// BENCH_PG_AFTER_MIGRATE: SQL run after the migrations (an index added or dropped, to price it).
// singlesFirst: apply that many events one per transaction before the clock starts, so the apply
// path's prepared statements have settled on their plans for one-event chunks (as a worker idling
// at a few events a second would) when the measured chunks come.
import { EVENT_HEADERS } from '#domain/contract/event-headers.ts';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { migrate } from '#domain/store/migrate.ts';
import { buildDataset } from './dataset.ts';
import { relayPassForBenchmark } from './relay-pass.ts';

const resources = Number(process.argv[2] ?? 5000);
const chunkSize = Number(process.argv[3] ?? 1000);
const singlesFirst = Number(process.argv[4] ?? 0);
const postgres = await resolvePostgres((line) => console.error(line));
const name = `bench_pgcpu_${Date.now().toString(36)}`;
const admin = new pg.Client({ connectionString: postgres.adminUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const pool = new pg.Pool({ connectionString: withDatabase(postgres.adminUrl, name), max: 1 });

function backendCpuSeconds(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

try {
  await migrate(pool);
  // Experiments: statements run after migrating (`;`-separated), to price a schema change on the
  // apply path, e.g. BENCH_PG_AFTER_MIGRATE="CREATE INDEX ON inbox_events (event_id)".
  for (const sql of (process.env.BENCH_PG_AFTER_MIGRATE ?? '').split(';').filter((s) => s.trim())) await pool.query(sql);
  const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const pid = rows[0]!.pid;
  const records: SourceRecord[] = buildDataset(resources).events.map((e, i) => ({
    topic: 'pgcpu',
    partition: 0,
    offset: String(i),
    key: e.key,
    value: Buffer.from(e.value),
    timestamp: String(Date.now()),
    headers: { [EVENT_HEADERS.receivedAt]: String(Date.now()) },
  }));
  const applier = new SnapshotApplier({ pool });
  for (const record of records.splice(0, singlesFirst)) await applier.applyBatch([record]);
  const applyCpu0 = backendCpuSeconds(pid);
  const nodeCpu0 = process.cpuUsage();
  const applyStart = performance.now();
  const outcomes: Record<string, number> = {};
  for (let i = 0; i < records.length; i += chunkSize) {
    for (const r of await applier.applyBatch(records.slice(i, i + chunkSize))) outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
  }
  const applyWall = performance.now() - applyStart;
  const applyCpu = backendCpuSeconds(pid) - applyCpu0;
  const nodeCpu = process.cpuUsage(nodeCpu0);

  const relayCpu0 = backendCpuSeconds(pid);
  const relayStart = performance.now();
  let relayed = 0;
  for (let n = await relayPassForBenchmark(pool, chunkSize); n > 0; n = await relayPassForBenchmark(pool, chunkSize)) relayed += n;
  const relayWall = performance.now() - relayStart;
  const relayCpu = backendCpuSeconds(pid) - relayCpu0;

  const us = (s: number, n: number) => ((s / n) * 1e6).toFixed(1);
  console.log(
    JSON.stringify({
      events: records.length,
      outcomes,
      applyPgCpuUsPerEvent: us(applyCpu, records.length),
      applyNodeCpuUsPerEvent: us((nodeCpu.user + nodeCpu.system) / 1e6, records.length),
      applyWallUsPerEvent: us(applyWall / 1000, records.length),
      relayed,
      relayPgCpuUsPerRecord: us(relayCpu, Math.max(relayed, 1)),
      relayWallUsPerRecord: us(relayWall / 1000, Math.max(relayed, 1)),
    }),
  );
} finally {
  await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  await postgres.stop();
}
