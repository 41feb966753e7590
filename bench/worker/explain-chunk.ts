// Where a chunk's Postgres time goes: applies the benchmark's dataset (one partition's worth of
// chunks) to a fresh database, then one more chunk with auto_explain reporting every statement
// of the transaction (ANALYZE, BUFFERS, WAL) back to this client. Needs a superuser URL (LOAD).
// Usage: npx tsx bench/worker/explain-chunk.ts [chunkSize=1000] [warmChunks=20]
import pg from 'pg';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { migrate } from '#domain/store/migrate.ts';
import { buildDataset } from './dataset.ts';

const chunkSize = Number(process.argv[2] ?? 1000);
const warmChunks = Number(process.argv[3] ?? 20);
const postgres = await resolvePostgres((line) => console.error(line));
const name = `bench_explain_${Date.now().toString(36)}`;
const admin = new pg.Client({ connectionString: postgres.adminUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const pool = new pg.Pool({ connectionString: withDatabase(postgres.adminUrl, name), max: 1 });
try {
  await migrate(pool);
  const records: SourceRecord[] = buildDataset(Math.ceil(((warmChunks + 1) * chunkSize) / 10)).events.map((e, i) => ({
    topic: 'explain',
    partition: 0,
    offset: String(i),
    key: e.key,
    value: Buffer.from(e.value),
    timestamp: String(Date.now()),
    headers: {},
  }));
  const applier = new SnapshotApplier({ pool });
  for (let c = 0; c < warmChunks; c += 1) await applier.applyBatch(records.slice(c * chunkSize, (c + 1) * chunkSize));

  const client = await pool.connect();
  const notices: string[] = [];
  client.on('notice', (n) => notices.push(n.message ?? ''));
  await client.query(`LOAD 'auto_explain'`);
  await client.query(
    `SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on;
     SET auto_explain.log_wal = on; SET auto_explain.log_timing = on; SET client_min_messages = log`,
  );
  client.release();
  const started = performance.now();
  const results = await applier.applyBatch(records.slice(warmChunks * chunkSize, (warmChunks + 1) * chunkSize));
  const elapsed = performance.now() - started;
  const outcomes: Record<string, number> = {};
  for (const r of results) outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
  for (const n of notices) console.log(`${n}\n`);
  console.log(
    `chunk of ${results.length} events: ${elapsed.toFixed(1)} ms wall (with auto_explain timing), outcomes ${JSON.stringify(outcomes)}`,
  );
} finally {
  await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  await postgres.stop();
}
