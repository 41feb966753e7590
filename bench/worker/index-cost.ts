// What the operator console's indexes (migration 0015) cost the worker's applies: the apply path
// (SnapshotApplier.applyBatch, the worker's SQL and batch size) straight at Postgres, as
// bench:worker's ceiling runs it, on a database with the indexes and on one without them
// (migrated, then those indexes dropped), in alternating rounds so both see the same machine.
// Every event carries a traceparent, so the partial trace-id index gets its entries too.
//   npx tsx bench/worker/index-cost.ts [resources=5000] [rounds=4]
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { defaultMigrationsDir, migrate } from '#domain/store/migrate.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { buildDataset } from './dataset.ts';

const RESOURCES = Number(process.argv[2] ?? 5000);
const ROUNDS = Number(process.argv[3] ?? 4);
const PARTITIONS = 12;
const BATCH_SIZE = 1000;
const CONCURRENCY = 3;
const MIGRATION = '0015_operator_reads.sql';

const postgres = await resolvePostgres();
const dataset = buildDataset(RESOURCES);
const lanes: SourceRecord[][][] = Array.from({ length: PARTITIONS }, () => []);
{
  const perPartition: SourceRecord[][] = Array.from({ length: PARTITIONS }, () => []);
  const now = String(Date.now());
  for (const e of dataset.events) {
    let h = 0;
    for (const c of e.key) h = (h * 31 + c.charCodeAt(0)) >>> 0;
    const partition = h % PARTITIONS;
    const list = perPartition[partition]!;
    list.push({
      topic: 'bench.events',
      partition,
      offset: String(list.length),
      key: e.key,
      value: Buffer.from(e.value),
      timestamp: now,
      headers: { traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01` },
    });
  }
  perPartition.forEach((records, p) => {
    for (let i = 0; i < records.length; i += BATCH_SIZE) lanes[p]!.push(records.slice(i, i + BATCH_SIZE));
  });
}
const indexes = [...readFileSync(`${defaultMigrationsDir}/${MIGRATION}`, 'utf8').matchAll(/IF NOT EXISTS (\w+)/g)].map((m) => m[1]!);

async function round(withIndexes: boolean, n: number): Promise<number> {
  const name = `bench_index_cost_${process.pid}_${n}`;
  const admin = new pg.Client({ connectionString: postgres.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(postgres.adminUrl, name);
  const pool = createPool({ url, max: 10, applicationName: 'bench-index-cost' });
  try {
    await migrate(pool);
    if (!withIndexes) for (const i of indexes) await pool.query(`DROP INDEX ${i}`);
    const applier = new SnapshotApplier({ pool });
    const queue = lanes.map((chunks) => chunks);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) for (const chunk of next) await applier.applyBatch(chunk);
      }),
    );
    return dataset.events.length / ((performance.now() - started) / 1000);
  } finally {
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

const rates: Record<'with' | 'without', number[]> = { with: [], without: [] };
for (let n = 0; n < ROUNDS; n += 1) {
  // Alternate which goes first, so neither always gets the quieter minute.
  for (const withIndexes of n % 2 === 0 ? [false, true] : [true, false]) {
    const rate = await round(withIndexes, n * 2 + (withIndexes ? 1 : 0));
    rates[withIndexes ? 'with' : 'without'].push(Math.round(rate));
    console.error(`[index-cost] round ${n + 1} ${withIndexes ? 'with' : 'without'} the 0015 indexes: ${Math.round(rate)} events/s`);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `${dataset.events.length} events, ${ROUNDS} rounds; events/s without: ${rates.without.join(', ')} (median ${median(rates.without)}); with: ${rates.with.join(', ')} (median ${median(rates.with)})`,
);
