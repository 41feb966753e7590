// The bridge's services as processes: how each is started (entry point, Node flags) and its
// admin port scheme. Used by `npm start` (infra/dev/up.ts, supervised) and by `npm run ingress` /
// `npm run worker` (infra/dev/service.ts, one process each).
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { buildBundles, bundlePath } from '../build/build.ts';
import { repoRoot } from '../paths.ts';
import type { SupervisedProcess } from './supervisor.ts';

export type ServiceKind = 'ingress' | 'worker' | 'console';

export interface ServiceSpec {
  kind: ServiceKind;
  main: string;
  nodeArgs: string[];
  /**
   * Environment the process runs with unless the caller's environment sets the same name
   * (allocator settings; the service's own configuration comes from its env and infra/dev/dev.env).
   */
  env: Record<string, string>;
  /** The admin port when nothing else is said (the service's own ADMIN_PORT default). */
  defaultAdminPort: number;
}

export const serviceSpecs: Record<ServiceKind, ServiceSpec> = {
  // A bounded young generation keeps the ingress's RSS within 150 MB at full load: from its bundle,
  // 8 MB semi-spaces peaked at 128-142 MB in ten bench:ingress / bench/ingress/flags.ts processes.
  // Alone they let one process in three reach 175-188 MB (old space grown to ~100 MB for ~30 MB
  // live); a 96 MB old generation and two glibc malloc arenas keep it at 131-139 MB at the same
  // rate and CPU, and at ~280 MB (not 1.1 GB) under 128 concurrent 860 KiB webhooks
  // (bench/results/footprint.md).
  // --concurrent-turbofan-max-threads=1 (V8's default is 4), for both services: about 10,000
  // requests after a start V8 moves the whole request path (the HTTP parser, verify, publish,
  // respond: dozens of functions at once) from Maglev to TurboFan, 10-55 ms of compilation each. On
  // four threads that burst took both cores of a 2-core machine for ~300 ms and stalled every
  // process on it; at 1,000 req/s POST -> ack p99 was 258 / 73 / 180 / 297 / 101 ms against 82 / 79
  // / 70 / 57 / 78 with one compiler thread, POST -> applied 296 / 171 / 234 / 349 / 192 against
  // 139 / 183 / 119 / 105 / 173 ms (bench:e2e, five rounds, alternating).
  ingress: {
    kind: 'ingress',
    main: 'services/ingress/main.ts',
    nodeArgs: ['--max-semi-space-size=8', '--max-old-space-size=96', '--concurrent-turbofan-max-threads=1'],
    env: { MALLOC_ARENA_MAX: '2' },
    defaultAdminPort: DEFAULTS.adminPort.ingress,
  },
  // 16 MB semi-spaces (64 before) and a 96 MB old generation, with the relay on the worker's event
  // loop (WORKER_RELAY=inline): peak RSS 231 MB draining a 200,000-event backlog (425 MB with the
  // relay thread and no old-generation bound), and it drained 400 events of 950 KB each at 286 MB
  // (bench/results/footprint.md).
  // --heap-growing-percent=100: with the old generation bounded, V8 grew it by ~10% past what a
  // mark-compact left live (~23 MB), so at 1,000 req/s the worker ran a full mark-compact every
  // ~200 ms (62 against 71 scavenges) and its GC threads took a fifth of a core. Doubling instead:
  // 16 mark-compacts, worker CPU 43-44% -> 34-36% of a core in bench:e2e at 1,000 req/s, the same
  // peak RSS within a few MB (bench:worker backlog: 236 against 232 MB, 11,227 against 10,951 events/s).
  worker: {
    kind: 'worker',
    main: 'services/worker/main.ts',
    nodeArgs: ['--max-semi-space-size=16', '--max-old-space-size=96', '--heap-growing-percent=100', '--concurrent-turbofan-max-threads=1'],
    env: {},
    defaultAdminPort: DEFAULTS.adminPort.worker,
  },
  // The console has no admin port of its own: this is its web port (CONSOLE_PORT).
  console: {
    kind: 'console',
    main: 'services/console/main.ts',
    nodeArgs: [],
    env: {},
    defaultAdminPort: DEFAULTS.consolePort,
  },
};

/** Builds every service's bundle (infra/build/build.ts) and returns their paths; run it before spawnService. */
export async function buildServices(): Promise<string[]> {
  return buildBundles(Object.values(serviceSpecs).map((spec) => spec.main));
}

/** The node arguments that run a service from its bundle: its flags, any preloads, the bundle. */
export function serviceArgs(spec: ServiceSpec, extraNodeArgs: string[] = []): string[] {
  return [...spec.nodeArgs, ...extraNodeArgs, bundlePath(spec.main)];
}

/** The environment a service runs with: its spec's, then `env` (which wins where both set a name). */
export function serviceEnv(spec: ServiceSpec, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...spec.env, ...env };
}

/** Starts the service as a child process (stdout and stderr shared with this one), from the bundle buildServices wrote. */
export function spawnService(spec: ServiceSpec, env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, serviceArgs(spec), {
    cwd: repoRoot,
    env: serviceEnv(spec, env),
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

/** A child process as the supervisor sees it: one exit notification, also when spawning failed. */
export function supervised(child: ChildProcess): SupervisedProcess {
  let exited = false;
  const listeners: Array<(code: number | null, signal: NodeJS.Signals | null) => void> = [];
  const done = (code: number | null, signal: NodeJS.Signals | null) => {
    if (exited) return;
    exited = true;
    for (const listener of listeners) listener(code, signal);
  };
  child.once('exit', done);
  // 'error' without a process (spawn failed) is followed by no 'exit'.
  child.once('error', () => {
    if (child.pid === undefined) done(null, null);
  });
  return {
    pid: child.pid,
    kill: (signal) => {
      if (!exited) child.kill(signal);
    },
    onExit: (listener) => {
      listeners.push(listener);
    },
  };
}

/**
 * The signal that asks a service to stop when this process got `received`. The services stop
 * gracefully on SIGINT or SIGTERM, but each handles either only once (a repeat takes the default
 * action and kills the process). A terminal's Ctrl-C (SIGINT) or systemd's SIGTERM to the whole
 * control group reaches the service directly too, so the service is sent the other one: it then
 * gets each at most once, and exits cleanly whichever reached it first.
 */
export function stopSignalFor(received: NodeJS.Signals): NodeJS.Signals {
  return received === 'SIGTERM' ? 'SIGINT' : 'SIGTERM';
}

/** The admin ports of `npm start`: the ingress on INGRESS_ADMIN_PORT, worker i (0-based) on WORKER_ADMIN_PORT + i. */
export function upAdminPorts(env: NodeJS.ProcessEnv, workers: number): { ingress: number; workers: number[] } {
  const ingress = Number(env.INGRESS_ADMIN_PORT ?? serviceSpecs.ingress.defaultAdminPort);
  const first = Number(env.WORKER_ADMIN_PORT ?? serviceSpecs.worker.defaultAdminPort);
  return { ingress, workers: Array.from({ length: workers }, (_, i) => first + i) };
}

/** WORKERS for `npm start`: a positive integer, 1 when unset. */
export function parseWorkerCount(value: string | undefined): number {
  if (value === undefined || value === '') return 1;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`WORKERS must be an integer from 1 to 64, not ${JSON.stringify(value)}`);
  return n;
}

async function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * An admin port for `npm run worker` without ADMIN_PORT, so several workers run side by side:
 * the first port from `from` upward that nothing listens on and no other live process has
 * claimed. A service binds its admin port only once it is up (seconds after start), so a claim
 * file (`<lockDir>/<port>.pid`, created exclusively, holding this process's pid) keeps two
 * workers started at the same moment apart. `release` removes it (also done at exit).
 */
export async function claimPort(from: number, lockDir: string, attempts = 64): Promise<{ port: number; release: () => void }> {
  mkdirSync(lockDir, { recursive: true });
  for (let port = from; port < from + attempts; port += 1) {
    const file = path.join(lockDir, `${port}.pid`);
    if (existsSync(file)) {
      const holder = Number(readFileSync(file, 'utf8'));
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && pidAlive(holder)) continue;
      rmSync(file, { force: true }); // left by a process that is gone
    }
    if (!(await canBind(port))) continue;
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
    } catch {
      continue; // claimed by another process just now
    }
    const release = () => {
      try {
        if (readFileSync(file, 'utf8') === String(process.pid)) rmSync(file, { force: true });
      } catch {
        // already gone
      }
    };
    process.once('exit', release);
    return { port, release };
  }
  throw new Error(`no free port in ${from}-${from + attempts - 1}`);
}
