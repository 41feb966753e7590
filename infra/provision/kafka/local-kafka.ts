import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { brokerReady } from '#plumbing/kafka/client.ts';
import { cacheDir, repoRoot } from '../../paths.ts';

/** The Apache Kafka version the bridge is developed and tested against (KRaft, no ZooKeeper). */
export const KAFKA_VERSION = '4.1.1';

const jarsDir = path.join(cacheDir, 'kafka', KAFKA_VERSION, 'libs');
const pomFile = path.join(repoRoot, 'infra', 'provision', 'kafka', 'pom.xml');

export interface LocalKafkaOptions {
  /** Folder name under .cache/kafka/data; a cluster's identity. */
  name: string;
  nodes: 1 | 2 | 3;
  /** Broker i listens on basePort + 2i, its controller on basePort + 2i + 1. */
  basePort: number;
  heapMb?: number;
  /**
   * Let the JVM compile hot code with C2 (its default), for a broker that serves for minutes: the
   * shared single broker that npm start, kafka:start and the tests use. Off (C1 only, which starts
   * with less CPU) for the short-lived clusters a test starts and kills. Once warm, C2 costs the
   * broker less CPU and lowers the bridge's median latency (bench:e2e, bench/results/e2e.md).
   */
  fullJit?: boolean;
  /** Broker settings over the ones below (a test that needs a cluster to behave otherwise). */
  brokerProperties?: Record<string, string>;
  log?: (line: string) => void;
}

interface NodeSpec {
  id: number;
  port: number;
  controllerPort: number;
  dir: string;
}

/** Fetches the broker jars from Maven Central once; later calls find them in the cache. */
export function ensureKafkaJars(log: (line: string) => void = () => {}): string {
  const marker = path.join(jarsDir, '.complete');
  if (existsSync(marker)) return jarsDir;
  log(`fetching Apache Kafka ${KAFKA_VERSION} jars from Maven Central into ${jarsDir}`);
  mkdirSync(jarsDir, { recursive: true });
  const result = spawnSync(
    'mvn',
    [
      '-B',
      '-q',
      '-f',
      pomFile,
      `-Dkafka.version=${KAFKA_VERSION}`,
      'dependency:copy-dependencies',
      '-DincludeScope=runtime',
      `-DoutputDirectory=${jarsDir}`,
    ],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  if (result.error) throw new Error(`could not run mvn (is Maven installed?): ${result.error.message}`);
  if (result.status !== 0) throw new Error(`mvn exited with ${result.status} while fetching Kafka jars`);
  if (!readdirSync(jarsDir).some((f) => f.startsWith('kafka_2.13-'))) throw new Error('kafka jar missing after mvn');
  writeFileSync(marker, new Date().toISOString());
  return jarsDir;
}

export async function portOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    socket.setTimeout(500);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A single-node or three-node KRaft cluster run from the official jars, on 127.0.0.1.
 * Reuses nodes that already answer; stops only the processes it started itself.
 */
export class LocalKafka {
  readonly options: Required<Omit<LocalKafkaOptions, 'log'>> & { log: (line: string) => void };
  private readonly specs: NodeSpec[];
  private readonly children = new Map<number, ChildProcess>();
  private clusterId: string | undefined;

  constructor(options: LocalKafkaOptions) {
    this.options = { heapMb: 384, fullJit: false, brokerProperties: {}, log: () => {}, ...options };
    const root = path.join(cacheDir, 'kafka', 'data', options.name);
    this.specs = Array.from({ length: options.nodes }, (_, i) => ({
      id: i + 1,
      port: options.basePort + 2 * i,
      controllerPort: options.basePort + 2 * i + 1,
      dir: path.join(root, `node-${i + 1}`),
    }));
  }

  get brokers(): string[] {
    return this.specs.map((s) => `127.0.0.1:${s.port}`);
  }

  /** Ids of the nodes this object started (and so may stop). */
  get ownedNodes(): number[] {
    return [...this.children.keys()];
  }

  brokerFor(nodeId: number): string {
    return `127.0.0.1:${this.spec(nodeId).port}`;
  }

  private spec(nodeId: number): NodeSpec {
    const spec = this.specs.find((s) => s.id === nodeId);
    if (!spec) throw new Error(`no node ${nodeId}`);
    return spec;
  }

  private properties(spec: NodeSpec): string {
    const n = this.specs.length;
    const voters = this.specs.map((s) => `${s.id}@127.0.0.1:${s.controllerPort}`).join(',');
    const minIsr = n >= 3 ? 2 : 1;
    return [
      'process.roles=broker,controller',
      `node.id=${spec.id}`,
      `controller.quorum.voters=${voters}`,
      `listeners=PLAINTEXT://127.0.0.1:${spec.port},CONTROLLER://127.0.0.1:${spec.controllerPort}`,
      `advertised.listeners=PLAINTEXT://127.0.0.1:${spec.port}`,
      'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
      'controller.listener.names=CONTROLLER',
      'inter.broker.listener.name=PLAINTEXT',
      `log.dirs=${path.join(spec.dir, 'logs')}`,
      'num.partitions=1',
      `default.replication.factor=${n}`,
      `min.insync.replicas=${minIsr}`,
      `offsets.topic.replication.factor=${n}`,
      'offsets.topic.num.partitions=10',
      `transaction.state.log.replication.factor=${n}`,
      `transaction.state.log.min.isr=${minIsr}`,
      `share.coordinator.state.topic.replication.factor=${n}`,
      `share.coordinator.state.topic.min.isr=${minIsr}`,
      'group.initial.rebalance.delay.ms=0',
      // Topics come from one source of truth (shared/plumbing/kafka/topics.ts); never implicitly.
      'auto.create.topics.enable=false',
      'log.retention.check.interval.ms=60000',
      'log.cleaner.backoff.ms=5000',
      // The cleaner's key map is a heap buffer, 128 MiB by default: a third of this broker's heap,
      // held for its whole life. 16 MiB still dedupes ~650k keys per pass (24 bytes a key at 90%
      // load), far above what the bridge's compacted topics hold between cleanings here.
      'log.cleaner.dedupe.buffer.size=16777216',
      'num.network.threads=2',
      'num.io.threads=4',
      'background.threads=4',
      // Later lines win in a properties file.
      ...Object.entries(this.options.brokerProperties).map(([key, value]) => `${key}=${value}`),
      '',
    ].join('\n');
  }

  private format(spec: NodeSpec, jars: string): void {
    if (existsSync(path.join(spec.dir, 'logs', 'meta.properties'))) return;
    mkdirSync(spec.dir, { recursive: true });
    const props = path.join(spec.dir, 'server.properties');
    writeFileSync(props, this.properties(spec));
    this.clusterId ??= this.readOrCreateClusterId();
    const result = spawnSync(
      'java',
      ['-cp', `${jars}/*`, 'kafka.tools.StorageTool', 'format', '-t', this.clusterId, '-c', props, '--ignore-formatted'],
      { encoding: 'utf8' },
    );
    if (result.status !== 0) throw new Error(`kafka storage format failed: ${result.stderr || result.stdout}`);
  }

  private readOrCreateClusterId(): string {
    const file = path.join(cacheDir, 'kafka', 'data', this.options.name, 'cluster-id');
    if (existsSync(file)) return readFileSync(file, 'utf8').trim();
    // Same format as `kafka-storage random-uuid` (a base64url Uuid), without starting a JVM for it.
    // Like Kafka's Uuid.randomUuid, never start with '-', which a command line would read as a flag.
    let id = randomBytes(16).toString('base64url');
    while (id.startsWith('-')) id = randomBytes(16).toString('base64url');
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, id);
    return id;
  }

  /** Starts every node that does not already answer, then waits until the cluster is ready. */
  async start(timeoutMs = 90_000): Promise<{ started: number[]; reused: number[] }> {
    const started: number[] = [];
    const reused: number[] = [];
    for (const spec of this.specs) {
      if (await portOpen(spec.port)) {
        reused.push(spec.id);
        continue;
      }
      this.spawnNode(spec);
      started.push(spec.id);
    }
    await this.waitReady(this.specs.length, timeoutMs);
    return { started, reused };
  }

  private spawnNode(spec: NodeSpec): void {
    const jars = ensureKafkaJars(this.options.log);
    this.format(spec, jars);
    writeFileSync(path.join(spec.dir, 'server.properties'), this.properties(spec));
    const logFile = openSync(path.join(spec.dir, 'broker.log'), 'a');
    const heap = this.options.heapMb;
    // JVM flags after apache/kafka bin/kafka-run-class.sh and kafka-server-start.sh, with a small heap.
    const child = spawn(
      'java',
      [
        `-Xms${Math.min(heap, 256)}m`,
        `-Xmx${heap}m`,
        '-XX:+UseG1GC',
        '-XX:MaxGCPauseMillis=20',
        '-XX:InitiatingHeapOccupancyPercent=35',
        '-XX:+ExplicitGCInvokesConcurrent',
        '-XX:MaxInlineLevel=15',
        '-Djava.awt.headless=true',
        ...(this.options.fullJit === true ? [] : ['-XX:TieredStopAtLevel=1']),
        '-Xshare:auto',
        '-Dorg.slf4j.simpleLogger.defaultLogLevel=info',
        '-Dorg.slf4j.simpleLogger.showDateTime=true',
        '-cp',
        `${jars}/*`,
        'kafka.Kafka',
        path.join(spec.dir, 'server.properties'),
      ],
      { stdio: ['ignore', logFile, logFile], detached: true },
    );
    child.unref();
    writeFileSync(path.join(spec.dir, 'broker.pid'), String(child.pid));
    this.children.set(spec.id, child);
    this.options.log(`started Kafka node ${spec.id} (pid ${child.pid}) on 127.0.0.1:${spec.port}`);
  }

  async waitReady(expectedBrokers = this.specs.length, timeoutMs = 90_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      for (const [id, child] of this.children) {
        if (child.exitCode !== null) {
          throw new Error(`Kafka node ${id} exited with ${child.exitCode}; see ${path.join(this.spec(id).dir, 'broker.log')}`);
        }
      }
      if (await brokerReady(this.brokers, expectedBrokers)) return;
      await delay(250);
    }
    throw new Error(`Kafka cluster ${this.options.name} not ready within ${timeoutMs} ms`);
  }

  /** Starts one node again (after stopNode/killNode) and waits until it answers. */
  async startNode(nodeId: number, timeoutMs = 90_000): Promise<void> {
    const spec = this.spec(nodeId);
    this.spawnNode(spec);
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await brokerReady([this.brokerFor(nodeId)], 1)) return;
      await delay(250);
    }
    throw new Error(`Kafka node ${nodeId} not ready within ${timeoutMs} ms`);
  }

  /** SIGTERM is a controlled shutdown; SIGKILL simulates a crash. */
  async stopNode(nodeId: number, signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 30_000): Promise<void> {
    const spec = this.spec(nodeId);
    const child = this.children.get(nodeId);
    const pid = child?.pid ?? this.pidFromFile(spec);
    if (pid === undefined || !pidAlive(pid)) {
      this.children.delete(nodeId);
      return;
    }
    process.kill(pid, signal);
    const deadline = Date.now() + timeoutMs;
    while (pidAlive(pid) && Date.now() < deadline) await delay(100);
    if (pidAlive(pid)) {
      process.kill(pid, 'SIGKILL');
      while (pidAlive(pid)) await delay(50);
    }
    this.children.delete(nodeId);
    rmSync(path.join(spec.dir, 'broker.pid'), { force: true });
  }

  /** Freezes a node (SIGSTOP): connections stay open and unanswered, as with a hung broker or a GC pause. */
  pauseNode(nodeId: number): void {
    this.signalNode(nodeId, 'SIGSTOP');
  }

  /** Lets a paused node go on (SIGCONT): whatever its sockets buffered is processed then. */
  resumeNode(nodeId: number): void {
    this.signalNode(nodeId, 'SIGCONT');
  }

  private signalNode(nodeId: number, signal: NodeJS.Signals): void {
    const spec = this.spec(nodeId);
    const pid = this.children.get(nodeId)?.pid ?? this.pidFromFile(spec);
    if (pid === undefined || !pidAlive(pid)) throw new Error(`Kafka node ${nodeId} of ${this.options.name} is not running`);
    process.kill(pid, signal);
  }

  private pidFromFile(spec: NodeSpec): number | undefined {
    const file = path.join(spec.dir, 'broker.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8'));
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  }

  /** Stops only the nodes this object started. */
  async stop(): Promise<void> {
    // Brokers first in reverse order; the last voters go down together.
    await Promise.all(this.ownedNodes.map((id) => this.stopNode(id)));
  }

  /** Stops the cluster's nodes from their pid files, whoever started them (the CLI's `stop`). */
  async stopAll(): Promise<void> {
    await Promise.all(
      this.specs.map(async (spec) => {
        const pid = this.pidFromFile(spec);
        this.children.delete(spec.id);
        if (pid !== undefined) await this.stopNodeByPid(spec, pid);
      }),
    );
  }

  private async stopNodeByPid(spec: NodeSpec, pid: number): Promise<void> {
    if (pidAlive(pid)) {
      process.kill(pid, 'SIGTERM');
      const deadline = Date.now() + 30_000;
      while (pidAlive(pid) && Date.now() < deadline) await delay(100);
      if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    }
    rmSync(path.join(spec.dir, 'broker.pid'), { force: true });
  }

  /** Removes the data folders (for a test cluster that should start empty). */
  wipe(): void {
    rmSync(path.join(cacheDir, 'kafka', 'data', this.options.name), { recursive: true, force: true });
  }
}

export const singleNodeDefaults = { name: 'single', nodes: 1, basePort: 9092, fullJit: true } as const;
export const threeNodeDefaults = { name: 'cluster3', nodes: 3, basePort: 19092 } as const;
