// bench:worker's three runs of a round, each into a fresh database: the worker in its own process
// (bench/worker/worker-child.ts), the same-SQL ceiling (the apply path straight at Postgres from this
// process) and the COPY ceiling (bench/worker/copy-write.ts). Each returns what it measured.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { withDatabase } from '../../infra/provision/postgres.ts';
import { repoRoot } from '../../infra/paths.ts';
import { applyNiceness, serviceSpecs } from '../../infra/dev/services.ts';
import { SnapshotApplier, type SourceRecord } from '#domain/apply/index.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { migrate } from '#domain/store/migrate.ts';
import { topicNames, type TopicSettings } from '#plumbing/kafka/topics.ts';
import { cpuSince, cpuSnapshot, type CpuSnapshot } from '../lib/cpu.ts';
import { procStatusMb } from '../lib/rss.ts';
import type { CopyPlan } from './copy-plan.ts';
import { runCopyCeiling, type CopyCeilingRound } from './copy-write.ts';

async function freshDatabase(adminUrl: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  await migrate(pool);
  await pool.end();
  return url;
}

async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
}

/** What a bench's worker process reads to consume the bench's topics into its database, in its own group. */
export function workerEnv(options: {
  brokers: string[];
  databaseUrl: string;
  settings: TopicSettings;
  groupId: string;
}): Record<string, string> {
  const { brokers, databaseUrl, settings, groupId } = options;
  return {
    KAFKA_BROKERS: brokers.join(','),
    DATABASE_URL: databaseUrl,
    TOPIC_EVENTS: settings.events,
    TOPIC_APPLIED: settings.applied,
    TOPIC_RETRY_LEVELS: String(topicNames(settings).retries.length),
    CONSUMER_GROUP: groupId,
  };
}

export interface TableCounts {
  resources: number;
  inbox: number;
  outbox: number;
}

async function tableCounts(url: string): Promise<TableCounts> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const { rows } = await pool.query(
    `SELECT (SELECT count(*)::int FROM resource_state) AS resources,
            (SELECT count(*)::int FROM inbox_events) AS inbox,
            (SELECT count(*)::int FROM applied_outbox) AS outbox`,
  );
  await pool.end();
  return rows[0] as TableCounts;
}

export interface WorkerRound {
  consumedMs: number;
  drainedMs: number;
  rssAtCommitMb: number;
  peakRssMb: number;
  outcomes: Record<string, number>;
  counts: TableCounts;
  /** First fetch -> last offset commit: the apply path, and the relay's work done by then. */
  cpu: CpuSnapshot | undefined;
  /** First fetch -> applied topic fully published: every applied record's CPU, the relay's included. */
  cpuToPublished: CpuSnapshot | undefined;
  rate: number;
  /** WORKER_ROLE=apply: the relay process beside it (WORKER_ROLE=relay), whose CPU is in the node figures. */
  relayProcess?: { peakRssMb: number };
}

export interface CeilingRound {
  ms: number;
  cpu: CpuSnapshot;
  counts: TableCounts;
  rate: number;
}

export interface RoundSetup {
  adminUrl: string;
  stamp: string;
  brokers: string[];
  settings: TopicSettings;
  /** The worker child's Node flags, then its entry: a bundle, or tsx's loader and the source. */
  nodeArgs: string[];
  workerChildEntry: string[];
  /** The worker's own entry (its bundle), run with WORKER_ROLE=relay beside a worker child with WORKER_ROLE=apply. */
  relayProcessEntry: string;
  /** The events topic's end offset per partition: the child exits once its group has committed them all. */
  ends: Record<string, number>;
  events: number;
  batchSize: number;
  maxBytesPerPartition: number;
  concurrency: number;
  /** The ceiling's input: per partition, its records in offset order, in chunks of the batch size. */
  lanes: SourceRecord[][][];
  /** Keep each round's database. */
  keep: boolean;
  /** Where to write the worker child's stdout, when set. */
  childStdoutFile: string | undefined;
  log: (line: string) => void;
}

export class BenchRounds {
  constructor(private readonly setup: RoundSetup) {}

  /** One worker process in its own consumer group, from the beginning of the topic, into a fresh database. */
  async worker(round: number, extraEnv: Record<string, string> = {}): Promise<WorkerRound> {
    const { adminUrl, stamp, brokers, settings, log } = this.setup;
    const database = `bench_worker_${stamp}_${round}`;
    const url = await freshDatabase(adminUrl, database);
    log(`round ${round}: running the worker`);
    // BENCH_WORKER_ENTRY: another build's worker child (a bundle), for an A/B of two trees.
    const { BENCH_NODE_ARGS: extraNodeArgs, BENCH_WORKER_ENTRY: entry, ...childEnv } = extraEnv;
    const args = [
      ...this.setup.nodeArgs,
      ...(extraNodeArgs ?? '').split(',').filter((a) => a.length > 0),
      ...(entry === undefined ? this.setup.workerChildEntry : [entry]),
    ];
    const baseEnv = {
      ...process.env,
      ...workerEnv({ brokers, databaseUrl: url, settings, groupId: `bench-applier-${stamp}-${round}` }),
    };
    // WORKER_ROLE=apply: the relay runs in a process of its own, as npm start's worker would with
    // WORKER_ROLE=relay beside it, started first so it leads before the first commit.
    const relayProcess = childEnv.WORKER_ROLE === 'apply' ? await this.startRelayProcess({ ...baseEnv, ...childEnv }) : undefined;
    const child = spawn(process.execPath, args, {
      cwd: repoRoot,
      env: {
        ...baseEnv,
        WORKER_BATCH_SIZE: String(this.setup.batchSize),
        WORKER_MAX_BYTES_PER_PARTITION: String(this.setup.maxBytesPerPartition),
        WORKER_PARTITIONS_CONCURRENCY: String(this.setup.concurrency),
        LOG_LEVEL: 'info',
        BENCH_END_OFFSETS: JSON.stringify(this.setup.ends),
        ...childEnv,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // As npm start runs it: the kernel gives the broker and Postgres the CPU first when both want it.
    applyNiceness(serviceSpecs.worker, child, { ...process.env, ...childEnv });
    let childOut = '';
    const marks = new Map<string, { own: number; at: CpuSnapshot }>();
    let pending = '';
    child.stdout.on('data', (d: Buffer) => {
      childOut += d.toString();
      pending += d.toString();
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (!line.startsWith('{"event"')) continue;
        const m = JSON.parse(line) as { event: string; cpuSeconds: number };
        // The relay process's CPU joins the worker child's: the node figure is both processes'.
        const at = cpuSnapshot(relayProcess?.pid);
        marks.set(m.event, { own: m.cpuSeconds + at.child, at });
      }
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const relayPeakRssMb = relayProcess ? procStatusMb(relayProcess.pid!, 'VmHWM') : undefined;
    if (relayProcess) {
      const exited = new Promise((resolve) => relayProcess.once('exit', resolve));
      relayProcess.kill('SIGTERM');
      await exited;
    }
    if (code !== 0) throw new Error(`worker child exited ${code}: ${childOut}`);
    if (this.setup.childStdoutFile) writeFileSync(this.setup.childStdoutFile, childOut);
    const run = JSON.parse(childOut.trim().split('\n').at(-1)!) as Omit<WorkerRound, 'counts' | 'cpu' | 'rate'>;
    const counts = await tableCounts(url);
    const first = marks.get('first-fetch');
    const last = marks.get('last-commit');
    const cpu = first && last ? { ...cpuSince(first.at, last.at), child: last.own - first.own } : undefined;
    const published = marks.get('fully-published');
    const cpuToPublished = first && published ? { ...cpuSince(first.at, published.at), child: published.own - first.own } : undefined;
    if (!this.setup.keep) await dropDatabase(adminUrl, database);
    const rate = this.setup.events / (run.consumedMs / 1000);
    log(`round ${round}: worker ${Math.round(rate)} events/s`);
    return {
      ...run,
      counts,
      cpu,
      cpuToPublished,
      rate,
      ...(relayPeakRssMb === undefined ? {} : { relayProcess: { peakRssMb: relayPeakRssMb } }),
    };
  }

  /** The worker's entry with WORKER_ROLE=relay, at npm start's flags and niceness; resolves once it runs. */
  private async startRelayProcess(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
    // BENCH_RELAY_NODE_ARGS=a,b: Node flags after the worker's, for the relay process alone.
    const extra = (env.BENCH_RELAY_NODE_ARGS ?? '').split(',').filter((a) => a.length > 0);
    const relay = spawn(process.execPath, [...this.setup.nodeArgs, ...extra, this.setup.relayProcessEntry], {
      cwd: repoRoot,
      env: { ...env, WORKER_ROLE: 'relay', ADMIN_PORT: '0', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    applyNiceness(serviceSpecs.worker, relay, env);
    let out = '';
    await new Promise<void>((resolve, reject) => {
      relay.stdout!.on('data', (d: Buffer) => {
        if (out.length < 1e6) out += d.toString();
        if (out.includes('"relay process started"')) resolve();
      });
      relay.once('exit', (code) => reject(new Error(`relay process exited ${code}: ${out}`)));
    });
    relay.stdout!.resume();
    return relay;
  }

  /** The same-SQL ceiling: the same apply path, no Kafka. Each lane feeds a partition's records in offset order. */
  async ceiling(round: number): Promise<CeilingRound> {
    const { adminUrl, stamp, log } = this.setup;
    const database = `bench_ceiling_${stamp}_${round}`;
    const url = await freshDatabase(adminUrl, database);
    log(`round ${round}: running the ceiling (apply path straight at Postgres)`);
    const ceilingPool = createPool({ url, max: 10, applicationName: 'bench-ceiling' });
    const applier = new SnapshotApplier({ pool: ceilingPool });
    const queue = this.setup.lanes.map((chunks, p) => ({ p, chunks }));
    const cpuBefore = cpuSnapshot();
    const ownBefore = process.cpuUsage();
    const started = performance.now();
    await Promise.all(
      Array.from({ length: this.setup.concurrency }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) for (const chunk of next.chunks) await applier.applyBatch(chunk);
      }),
    );
    const ms = performance.now() - started;
    const own = process.cpuUsage(ownBefore);
    const cpu = { ...cpuSince(cpuBefore, cpuSnapshot()), child: (own.user + own.system) / 1e6 };
    await ceilingPool.end();
    const counts = await tableCounts(url);
    if (!this.setup.keep) await dropDatabase(adminUrl, database);
    const rate = this.setup.events / (ms / 1000);
    log(`round ${round}: ceiling ${Math.round(rate)} events/s`);
    return { ms, cpu, counts, rate };
  }

  /** The COPY ceiling: the same rows, COPYed; a third run in each round. */
  async copyCeiling(round: number, plan: CopyPlan): Promise<CopyCeilingRound> {
    const { adminUrl, stamp, log } = this.setup;
    const database = `bench_copy_${stamp}_${round}`;
    const result = await runCopyCeiling(plan, { url: await freshDatabase(adminUrl, database), concurrency: this.setup.concurrency });
    if (!this.setup.keep) await dropDatabase(adminUrl, database);
    log(`round ${round}: COPY ceiling ${Math.round(result.rate)} events/s`);
    return result;
  }
}
