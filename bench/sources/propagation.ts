// npm run bench:sources: how long a change to sources takes to reach every running ingress. A fresh
// database and events topic, two ingresses reading sources from Postgres (SOURCES_FROM=postgres, as
// `npm start` runs them), then rounds of: create a source through the catalog and time, from the
// write's commit, until each ingress answers a webhook signed with its secret 202; rotate it with no
// overlap and time until each refuses the old secret (401) and takes the new one; disable it and time
// until each answers 401. Each ingress is asked every BENCH_POLL_MS. Writes bench/results/sources.md
// and .json (the machine, every round, the slowest ingress per change). Exits 1 when a change took
// longer than the issue's 2 s on some ingress, 2 on bad settings.
//
//   npm run bench:sources
// Environment: BENCH_ROUNDS (20), BENCH_POLL_MS (10), BENCH_LOG_LEVEL (the ingresses', warn),
// KAFKA_BROKERS, DATABASE_URL (an admin URL).
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { migrate } from '#domain/store/migrate.ts';
import { brokerReady, createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { sampleThemeEvent } from '#domain/contract/sample.ts';
import { signWebhook } from '#domain/signing/index.ts';
import { keyringFromEnv, SourceCatalog } from '#domain/sources/index.ts';
import { freePort, startService, stopService, waitReady, type BenchService } from '../lib/bridge.ts';
import { machineNow, RESULTS_DIR, versionsNow, writeBenchResult } from '../lib/results.ts';
import { percentile } from '../lib/stats.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 10);
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'warn';
const GOAL_MS = 2000;
if (!(Number.isInteger(ROUNDS) && ROUNDS >= 1 && Number.isInteger(POLL_MS) && POLL_MS >= 1)) {
  console.error('BENCH_ROUNDS and BENCH_POLL_MS must be whole numbers of at least 1');
  process.exit(2);
}
const log = (line: string) => console.error(`[bench:sources] ${line}`);
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? DEFAULTS.dev.kafkaBrokers);
if (!(await brokerReady(brokers))) {
  console.error(`no Kafka broker answers at ${brokers.join(',')} (npm run kafka:start, or set KAFKA_BROKERS)`);
  process.exit(1);
}

const CHANGES = ['create', 'rotate', 'disable'] as const;
type Change = (typeof CHANGES)[number];
interface Round {
  round: number;
  loadAverage: number;
  /** Milliseconds from the write's commit until each ingress showed it, by change, one value per ingress. */
  ms: Record<Change, number[]>;
}

const loadBefore = os.loadavg()[0]!;
const ranAt = new Date().toISOString();
const stamp = `${Date.now().toString(36)}${process.pid.toString(36)}`;
const postgres = await resolvePostgres(log);
const database = `bench_sources_${stamp}`;
const databaseUrl = withDatabase(postgres.adminUrl, database);
const topic = `bench.sources.${stamp}.events`;
const secretKeys = `bench:${randomBytes(32).toString('base64')}`;
const kafka = createKafka({
  brokers,
  clientId: 'bench-sources',
  logger: createLogger({ name: 'bench-sources', level: 'warn' }, process.stderr),
});
const admin = kafka.admin();
const ingresses: Array<BenchService & { port: number }> = [];
let pool: pg.Pool | undefined;

async function cleanUp(): Promise<void> {
  await Promise.all(ingresses.map((i) => stopService(i).catch(() => null)));
  await pool?.end().catch(() => {});
  await admin.deleteTopics({ topics: [topic] }).catch(() => {});
  await admin.disconnect().catch(() => {});
  const c = new pg.Client({ connectionString: postgres.adminUrl });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`).catch(() => {});
  await c.end();
  await postgres.stop();
}

/** The status one ingress answers for a webhook of `source` signed with `secret`. */
async function post(port: number, source: string, tenant: string, secret: string): Promise<number> {
  const event = sampleThemeEvent({ tenant_id: tenant });
  const body = JSON.stringify(event);
  const headers = signWebhook({ scheme: 'hmac-sha256', secret, body, id: event.event_id });
  const answer = await fetch(`http://127.0.0.1:${port}/webhooks/${source}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body,
  });
  await answer.arrayBuffer();
  return answer.status;
}

/** Milliseconds from `since` until `seen` holds on the ingress, asking every POLL_MS. */
async function until(since: number, seen: () => Promise<boolean>): Promise<number> {
  for (;;) {
    if (await seen()) return performance.now() - since;
    // A bound on the wait only, so a change that never arrives ends the run instead of hanging it.
    if (performance.now() - since > 30_000) throw new Error('a change did not reach an ingress within 30 s');
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

let exitCode = 1;
try {
  {
    const c = new pg.Client({ connectionString: postgres.adminUrl });
    await c.connect();
    await c.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
    await c.end();
  }
  pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  await migrate(pool);
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
  for (const n of [1, 2]) {
    const port = await freePort();
    const service = await startService(serviceSpecs.ingress, {
      env: {
        KAFKA_BROKERS: brokers.join(','),
        TOPIC_EVENTS: topic,
        PORT: String(port),
        HOST: '127.0.0.1',
        SOURCES_FROM: 'postgres',
        DATABASE_URL: databaseUrl,
        BRIDGE_SECRET_KEYS: secretKeys,
        LOG_LEVEL,
      },
      logFile: path.join(os.tmpdir(), `bench-sources-ingress${n}-${stamp}.log`),
    });
    ingresses.push({ ...service, port });
  }
  await Promise.all(ingresses.map((i) => waitReady(i)));
  const catalog = new SourceCatalog(pool, keyringFromEnv({ BRIDGE_SECRET_KEYS: secretKeys }));
  const pgVersion = (await pool.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;

  const rounds: Round[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) {
    const id = `bench-${round}`;
    const tenant = `tenant_bench_${round}`;
    const first = randomBytes(24).toString('base64url');
    const loadAverage = os.loadavg()[0]!;
    const ms = {} as Record<Change, number[]>;

    const created = await catalog.create('bench', {
      id,
      tenants: [tenant],
      resourceTypes: ['theme'],
      secrets: [{ id: `${id}-a`, value: first }],
    });
    let t0 = performance.now();
    ms.create = await Promise.all(ingresses.map((i) => until(t0, async () => (await post(i.port, id, tenant, first)) === 202)));

    const rotated = await catalog.rotate('bench', id, created.source.revision, {
      secretId: `${id}-b`,
      generate: true,
      retireOthersAfter: new Date().toISOString(),
    });
    t0 = performance.now();
    ms.rotate = await Promise.all(
      ingresses.map((i) =>
        until(
          t0,
          async () => (await post(i.port, id, tenant, first)) === 401 && (await post(i.port, id, tenant, rotated.generated!)) === 202,
        ),
      ),
    );

    await catalog.setEnabled('bench', id, rotated.source.revision, false);
    t0 = performance.now();
    ms.disable = await Promise.all(
      ingresses.map((i) => until(t0, async () => (await post(i.port, id, tenant, rotated.generated!)) === 401)),
    );
    rounds.push({
      round,
      loadAverage: Math.round(loadAverage * 100) / 100,
      ms: mapValues(ms, (v) => v.map((x) => Math.round(x * 10) / 10)),
    });
    log(`round ${round}: ${CHANGES.map((c) => `${c} ${ms[c].map((x) => x.toFixed(0)).join('/')} ms`).join(', ')}`);
  }

  const slowest = (change: Change) => rounds.map((r) => Math.max(...r.ms[change]));
  const summary = CHANGES.map((change) => ({
    label: `${change} → every ingress (slowest of 2), ms`,
    unit: 'ms',
    values: slowest(change),
    target: `≤ ${GOAL_MS}`,
  }));
  const result = {
    name: 'sources',
    command: 'npm run bench:sources',
    ranAt,
    machine: machineNow(loadBefore),
    versions: versionsNow({ kafka: KAFKA_VERSION, postgres: pgVersion }),
    settings: { rounds: ROUNDS, pollMs: POLL_MS, ingresses: 2, configPollMs: 1000 },
    rounds: rounds as unknown as Array<Record<string, unknown>>,
    summary,
  };
  writeBenchResult(result);
  const md = renderMarkdown(result.machine, rounds, slowest);
  writeFileSync(path.join(RESULTS_DIR, 'sources.md'), md);
  process.stdout.write(md);
  const worst = Math.max(...CHANGES.flatMap(slowest));
  exitCode = worst <= GOAL_MS ? 0 : 1;
  if (exitCode !== 0) log(`a change took ${worst.toFixed(0)} ms to reach an ingress: over the ${GOAL_MS} ms goal`);
} catch (error) {
  log(`failed: ${(error as Error).stack ?? String(error)}`);
} finally {
  await cleanUp();
}
process.exit(exitCode);

function mapValues<K extends string, V, W>(record: Record<K, V>, fn: (v: V) => W): Record<K, W> {
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, fn(v as V)])) as Record<K, W>;
}

function renderMarkdown(machine: ReturnType<typeof machineNow>, rounds: Round[], slowest: (c: Change) => number[]): string {
  const stat = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return `${percentile(sorted, 50).toFixed(0)} / ${percentile(sorted, 95).toFixed(0)} / ${sorted.at(-1)!.toFixed(0)}`;
  };
  return [
    '# Sources: a change reaching every ingress',
    '',
    `\`npm run bench:sources\`, ${ranAt}. Machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB; load ${machine.loadAverage?.before} → ${machine.loadAverage?.after}.`,
    `Two ingresses read sources from Postgres (LISTEN/NOTIFY, and a version check every second); each is asked every ${POLL_MS} ms.`,
    "A time runs from the write's commit until the ingress answers as the change says: create (202 with the new secret), rotate with no",
    'overlap (401 with the old secret and 202 with the new), disable (401).',
    '',
    `| change | slowest ingress, median / p95 / max (ms) | goal |`,
    '| --- | --- | --- |',
    ...CHANGES.map((c) => `| ${c} | ${stat(slowest(c))} | ≤ ${GOAL_MS} |`),
    '',
    '## Every round (ms, ingress 1 / ingress 2)',
    '',
    '| round | load | create | rotate | disable |',
    '| --- | --- | --- | --- | --- |',
    ...rounds.map(
      (r) => `| ${r.round} | ${r.loadAverage} | ${CHANGES.map((c) => r.ms[c].map((x) => x.toFixed(0)).join(' / ')).join(' | ')} |`,
    ),
    '',
  ].join('\n');
}
