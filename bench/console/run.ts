// npm run bench:console: the operator console's pages on a big bridge, timed. A fresh database
// (migrated) and fresh topics are filled as test/console/cheap-pages.test.ts fills its own
// (test/kit/big-bridge.ts: a million inbox rows, a 100,000-record DLQ over 29 days), the console is
// started from its bundle as `npm start` runs it, and after a warm-up round each round requests
// every page once (bench/console/pages.ts), checking that each answer shows what it should. Writes
// bench/results/console.md and .json (the machine, the settings, every round, each page's median).
// Exits 0 when every page's median over the rounds is within its goal, 1 when one is not (or the
// run breaks, or a page answers wrong), 2 on bad settings. Drops its database and topics after.
//
//   npm run bench:console
// Environment: BENCH_ROUNDS (5), BENCH_KEEP=1 (keep the database and topics), BENCH_LOG_LEVEL (the
// console's, warn), KAFKA_BROKERS, DATABASE_URL (an admin URL).
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { KAFKA_VERSION } from '../../infra/provision/kafka/local-kafka.ts';
import { repoRoot } from '../../infra/paths.ts';
import { resolvePostgres, withDatabase } from '../../infra/provision/postgres.ts';
import { serviceSpecs } from '../../infra/dev/services.ts';
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { migrate } from '#domain/store/migrate.ts';
import { brokerReady, createKafka, parseBrokers } from '#plumbing/kafka/client.ts';
import { ensureTopics, topicNames, topicSpecs, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { createLogger } from '#plumbing/logging/logger.ts';
import { BIG_BRIDGE, fillBigDlq, fillBigInbox } from '../../test/kit/big-bridge.ts';
import { sleep } from '../../test/kit/eventually.ts';
import { ancestorPids, freePort, startService, stopService, type BenchService } from '../lib/bridge.ts';
import { cpuCalibrationMs, OtherRunsWatch } from '../lib/machine.ts';
import { machineNow, RESULTS_DIR, versionsNow, writeBenchResult } from '../lib/results.ts';
import { consolePages, dlqRecordsRead, olderLink, verdicts, type PageSpec } from './pages.ts';
import { renderReport, type ConsoleRound } from './report.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const KEEP = process.env.BENCH_KEEP === '1';
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'warn';
if (!(Number.isInteger(ROUNDS) && ROUNDS >= 1)) {
  console.error(`BENCH_ROUNDS must be a whole number of at least 1, not ${process.env.BENCH_ROUNDS}`);
  process.exit(2);
}

const log = (line: string) => console.error(`[bench:console] ${line}`);
const brokers = parseBrokers(process.env.KAFKA_BROKERS ?? DEFAULTS.dev.kafkaBrokers);
if (!(await brokerReady(brokers))) {
  console.error(`no Kafka broker answers at ${brokers.join(',')} (npm run kafka:start, or set KAFKA_BROKERS)`);
  process.exit(1);
}

const ourPids = ancestorPids();
const otherRuns = new OtherRunsWatch(() => ourPids);
const loadBefore = os.loadavg()[0]!;
const ranAt = new Date().toISOString();
const calibrationBefore = cpuCalibrationMs();

const stamp = `${Date.now().toString(36)}${process.pid.toString(36)}`;
const postgres = await resolvePostgres(log);
const database = `bench_console_${stamp}`;
const databaseUrl = withDatabase(postgres.adminUrl, database);
const settings: TopicSettings = {
  ...DEFAULTS.topics,
  events: `bench.console.${stamp}.events`,
  applied: `bench.console.${stamp}.applied`,
  eventsPartitions: BIG_BRIDGE.partitions,
};
const names = topicNames(settings);
// The client's logs to stderr, beside the bench's own lines: stdout carries the report.
const kafka = createKafka({
  brokers,
  clientId: 'bench-console',
  logger: createLogger({ name: 'bench-console', level: 'warn' }, process.stderr),
});
const admin = kafka.admin();
let consoleService: BenchService | undefined;
let cleaned: Promise<void> | undefined;

/** Stops the console and drops what the run created (unless BENCH_KEEP=1); once, whoever asks first. */
const cleanUp = () =>
  (cleaned ??= (async () => {
    if (consoleService) await stopService(consoleService).catch(() => null);
    if (!KEEP) {
      await admin.deleteTopics({ topics: Object.values(names).flat() }).catch(() => {});
      const c = new pg.Client({ connectionString: postgres.adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`).catch(() => {});
      await c.end();
    } else log(`kept database ${database} and topics bench.console.${stamp}.*`);
    await admin.disconnect().catch(() => {});
    await postgres.stop();
    otherRuns.stop();
  })());
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping the console, dropping the data`);
    void cleanUp().finally(() => process.exit(1));
  });
}

async function timed(base: string, page: PageSpec): Promise<{ ms: number; text: string; problem: string | undefined }> {
  const t0 = performance.now();
  const answer = await fetch(base + page.path);
  const text = await answer.text();
  const ms = performance.now() - t0;
  const problem = answer.status !== 200 ? `answered ${answer.status}` : page.wrong(text);
  return { ms, text, problem };
}

let exitCode = 1;
try {
  {
    const c = new pg.Client({ connectionString: postgres.adminUrl });
    await c.connect();
    await c.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
    await c.end();
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    await migrate(pool);
    await pool.end();
  }
  await admin.connect();
  await ensureTopics(admin, topicSpecs(settings), settings.replicationFactor);
  log(
    `database ${database}, topics bench.console.${stamp}.*; filling ${BIG_BRIDGE.inboxRows} inbox rows and ${BIG_BRIDGE.dlqRecords} dead letters`,
  );
  const now = Date.now();
  const fillStarted = performance.now();
  await Promise.all([fillBigDlq(kafka, names, now), fillBigInbox(databaseUrl)]);
  const fillMs = performance.now() - fillStarted;
  log(`filled in ${(fillMs / 1000).toFixed(1)} s`);
  const pgVersion = await (async () => {
    const c = new pg.Client({ connectionString: databaseUrl });
    await c.connect();
    try {
      return (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    } finally {
      await c.end();
    }
  })();

  const port = await freePort();
  consoleService = await startService(serviceSpecs.console, {
    env: {
      KAFKA_BROKERS: brokers.join(','),
      DATABASE_URL: databaseUrl,
      TOPIC_EVENTS: settings.events,
      TOPIC_APPLIED: settings.applied,
      TOPIC_EVENTS_PARTITIONS: String(settings.eventsPartitions),
      TOPIC_RETRY_LEVELS: String(settings.retryLevels),
      CONSOLE_PORT: String(port),
      CONSOLE_HOST: '127.0.0.1',
      // No worker runs: the overview's lag part asks about a group nobody has, as on a fresh bridge.
      CONSUMER_GROUP: `bench-console-no-group-${stamp}`,
      // Nothing listens there: the overview shows the ingress's part as unreachable, at once.
      INGRESS_METRICS_URL: 'http://127.0.0.1:9/metrics',
      LOG_LEVEL: LOG_LEVEL,
    },
    logFile: path.join(os.tmpdir(), `bench-console-${stamp}.log`),
  });
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 60_000; ;) {
    if (consoleService.child.exitCode !== null)
      throw new Error(`the console exited with ${consoleService.child.exitCode}; see ${consoleService.logFile}`);
    if (
      await fetch(`${base}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error(`the console did not answer within 60 s; see ${consoleService.logFile}`);
    await sleep(200);
  }

  // The Older link of the newest page: the DLQ does not change during the run, so neither does it.
  const newest = await fetch(`${base}/dlq`).then((r) => r.text());
  const older = olderLink(newest);
  if (older === undefined) throw new Error('the newest dead-letter page has no Older link');
  const pages = consolePages(now, older);

  // The warm-up round: the console's first requests compile its code and open its connections.
  const warmUp: Record<string, number> = {};
  for (const page of pages) {
    const t = await timed(base, page);
    if (t.problem) throw new Error(`${page.name} (${page.path}): ${t.problem}`);
    warmUp[page.name] = Math.round(t.ms);
  }
  log(`warm-up: ${JSON.stringify(warmUp)}`);

  const rounds: ConsoleRound[] = [];
  const problems: string[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) {
    otherRuns.reset();
    const loadAverage = os.loadavg()[0]!;
    const ms: Record<string, number> = {};
    const recordsRead: Record<string, number> = {};
    for (const page of pages) {
      const t = await timed(base, page);
      if (t.problem) problems.push(`round ${round}, ${page.name} (${page.path}): ${t.problem}`);
      ms[page.name] = Math.round(t.ms * 10) / 10;
      const read = dlqRecordsRead(t.text);
      if (read !== undefined) recordsRead[page.name] = read;
    }
    rounds.push({ round, loadAverage: Math.round(loadAverage * 100) / 100, otherRuns: otherRuns.seen(), ms, recordsRead });
    log(`round ${round}: ${JSON.stringify(ms)}`);
  }

  const times = Object.fromEntries(pages.map((p) => [p.name, rounds.map((r) => r.ms[p.name]!)]));
  const judged = verdicts(pages, times);
  const calibrationAfter = cpuCalibrationMs();
  const machine = machineNow(loadBefore);
  const versions = versionsNow({ kafka: KAFKA_VERSION, postgres: pgVersion });
  const runSettings = {
    rounds: ROUNDS,
    inboxRows: BIG_BRIDGE.inboxRows,
    dlqRecords: BIG_BRIDGE.dlqRecords,
    partitions: BIG_BRIDGE.partitions,
    dlqSpanDays: BIG_BRIDGE.dlqSpanMs / (24 * 3600 * 1000),
    brokers: brokers.join(','),
    postgres: postgres.origin,
    consoleNodeArgs: consoleService.args.map((a) => (path.isAbsolute(a) ? path.relative(repoRoot, a) : a)).join(' '),
    pages: Object.fromEntries(pages.map((p) => [p.name, { path: p.path, goalMs: p.goalMs }])),
  };
  const report = renderReport({
    ranAt,
    machine,
    versions,
    calibrationMs: { before: calibrationBefore, after: calibrationAfter },
    fillSeconds: fillMs / 1000,
    rounds,
    warmUp,
    verdicts: judged,
    problems,
    settings: runSettings,
  });
  writeFileSync(path.join(RESULTS_DIR, 'console.md'), report);
  writeBenchResult({
    name: 'console',
    command: 'npm run bench:console',
    ranAt,
    machine,
    calibrationMs: { before: calibrationBefore, after: calibrationAfter },
    versions,
    settings: { ...runSettings, fillSeconds: Math.round(fillMs / 100) / 10, warmUpMs: warmUp },
    rounds: rounds.map((r) => ({ ...r })),
    summary: judged.map((v) => ({
      label: v.name,
      unit: 'ms',
      values: times[v.name]!,
      target: `median ≤ ${v.goalMs.toLocaleString('en')} ms`,
    })),
  });
  console.log(report);
  const missed = judged.filter((v) => !v.met);
  for (const v of missed) log(`${v.name}: median ${v.medianMs} ms, goal ${v.goalMs} ms: NOT met`);
  for (const p of problems) log(`wrong answer: ${p}`);
  exitCode = missed.length === 0 && problems.length === 0 ? 0 : 1;
} catch (error) {
  log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  exitCode = 1;
} finally {
  await cleanUp();
}
process.exit(exitCode);
