// The COPY ceiling: what Postgres on this machine absorbs for exactly the rows the apply path
// writes, written the fastest way Postgres takes rows in: the rows decided and encoded before the
// clock starts (bench/worker/copy-plan.ts), then COPYed chunk by chunk (bench/worker/copy-write.ts).
// bench:worker runs it in each round beside the worker and the same-SQL ceiling (bench/worker/run.ts,
// its section of the report: bench/worker/copy-report.ts).
// On its own, this compares, on the same prebuilt rows, the COPY ceiling with the store's statements
// one layer at a time (bench/worker/copy-layers.ts), and checks that the COPY and the apply path
// leave the same rows:
//   npx tsx bench/worker/copy-ceiling.ts [resources=20000] [concurrency=3] [rounds=1]
// Environment: BENCH_BATCH_SIZE, BENCH_COPY_RUNS=copy,copy-all,write,lock-write,lock-read-write
// (the apply path always runs, last, as the reference), BENCH_KEEP=1 (keep the databases).
import pg from 'pg';
import { migrate } from '#domain/store/migrate.ts';
import { partitionForKey } from '#plumbing/kafka/murmur2.ts';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import type { CpuSnapshot } from '../lib/cpu.ts';
import { buildDataset, partitionLanes } from './dataset.ts';
import { runStoreLayer, rowsDigest } from './copy-layers.ts';
import { planCopyCeiling } from './copy-plan.ts';
import { fmt, pct } from './copy-report.ts';
import { COPY_PHASES, runCopyCeiling, type Phases } from './copy-write.ts';

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
  const lanes = partitionLanes(buildDataset(resources).events, {
    topic: 'bench.copy',
    partitions,
    batchSize,
    partitionOf: (key) => partitionForKey(key, partitions),
  });
  const plan = await planCopyCeiling(lanes, { extras: true });
  console.error(`planned ${plan.events} events in ${plan.buildMs.toFixed(0)} ms: ${JSON.stringify(plan.rows)}`);

  type Result = { ms: number; rate: number; cpu: CpuSnapshot; backendCpu: number; phases?: Phases };
  const layer = { concurrency, lanes, plan };
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
      ['write', 'store write statement only (parameters prebuilt)', (url) => runStoreLayer('write', { url, ...layer })],
      ['lock-write', '+ the key locks (parameters prebuilt)', (url) => runStoreLayer('lock+write', { url, ...layer })],
      ['lock-read-write', '+ the read (parameters prebuilt)', (url) => runStoreLayer('lock+read+write', { url, ...layer })],
      ['apply', 'apply path (parse, decide, encode, same SQL)', (url) => runStoreLayer('apply path', { url, ...layer })],
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
      results.push({ run: name, round, digest: await rowsDigest(url), ...result });
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
    console.log(`| ${r.round} | ${r.run} | ${fmt(r.rate)} | ${us(r.backendCpu)} | ${us(r.cpu.postgres)} | ${us(r.cpu.child)} | ${same} |`);
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
