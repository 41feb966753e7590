import { spawn } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './infra.ts';

export interface BridgeRun {
  code: number | null;
  stdout: string;
  stderr: string;
  json: <T = any>() => T;
}

const mainTs = path.join(repoRoot, 'services', 'cli', 'main.ts');

// Variables a developer's shell may carry that would point a subprocess at the wrong place.
const scrubbed = [
  'KAFKA_BROKERS',
  'DATABASE_URL',
  'TOPIC_EVENTS',
  'TOPIC_APPLIED',
  'TOPIC_EVENTS_PARTITIONS',
  'TOPIC_RETRY_LEVELS',
  'CONSUMER_GROUP',
  'WEBHOOK_SOURCES_FILE',
  'SOURCES_FROM',
  'BRIDGE_SECRET_KEYS',
  'BRIDGE_SECRET_KEY_ID',
  'BRIDGE_ACTOR',
  'INGRESS_URL',
  'BRIDGE_LOG_LEVEL',
  'npm_lifecycle_event',
];

/** Runs `bridge <args>` as its own process, exactly as an operator would, with only the given config. */
export function runBridge(args: string[], env: Record<string, string | undefined> = {}, timeoutMs = 60_000): Promise<BridgeRun> {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of scrubbed) delete base[name];
  return new Promise((resolve, reject) => {
    // The flag main.ts's shebang gives the CLI: kafkajs schedules negative timeouts, and Node's warning
    // about them on stderr would break the JSON a test reads there.
    const child = spawn(process.execPath, ['--disable-warning=TimeoutNegativeWarning', '--import', 'tsx', mainTs, ...args], {
      cwd: repoRoot,
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`bridge ${args.join(' ')} did not finish within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({
        code,
        stdout,
        stderr,
        json: () => {
          try {
            return JSON.parse(stdout);
          } catch {
            throw new Error(`stdout of bridge ${args.join(' ')} is not JSON:\n${stdout}\nstderr: ${stderr}`);
          }
        },
      });
    });
  });
}

/** The env that points the CLI at a test's own topics, database and group. */
export function bridgeEnv(options: {
  brokers: string[];
  databaseUrl?: string;
  events?: string;
  applied?: string;
  partitions?: number;
  group?: string;
}): Record<string, string> {
  const env: Record<string, string> = { KAFKA_BROKERS: options.brokers.join(',') };
  if (options.databaseUrl) env.DATABASE_URL = options.databaseUrl;
  if (options.events) env.TOPIC_EVENTS = options.events;
  if (options.applied) env.TOPIC_APPLIED = options.applied;
  if (options.partitions) env.TOPIC_EVENTS_PARTITIONS = String(options.partitions);
  if (options.group) env.CONSUMER_GROUP = options.group;
  return env;
}
