// The bridge's services as processes: how each is started (entry point, Node flags) and its
// admin port scheme. Used by `npm start` (infra/dev/up.ts, supervised) and by `npm run ingress` /
// `npm run worker` (infra/dev/service.ts, one process each).
import { DEFAULTS } from '#plumbing/config/defaults.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
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
  /** Its niceness (Linux scheduling priority, 0 to 19; higher yields the CPU sooner); see serviceNiceness. */
  niceness: number;
}

export const serviceSpecs: Record<ServiceKind, ServiceSpec> = {
  // Small semi-spaces, a bounded old generation and two glibc malloc arenas keep the ingress's RSS
  // bounded at full load and under large bodies, at the same rate and CPU (bench/ingress/flags.ts).
  // --concurrent-turbofan-max-threads=1, for both services: once warm, V8 recompiles the whole
  // request path with TurboFan at once, and on several threads that burst takes every core of a
  // small machine and stalls the other processes; one thread spreads it out and lowers the POST ->
  // ack and POST -> applied tails (bench:e2e, docs/benchmarks.md).
  ingress: {
    kind: 'ingress',
    main: 'services/ingress/main.ts',
    nodeArgs: ['--max-semi-space-size=8', '--max-old-space-size=96', '--concurrent-turbofan-max-threads=1'],
    env: { MALLOC_ARENA_MAX: '2' },
    defaultAdminPort: DEFAULTS.adminPort.ingress,
    niceness: 0,
  },
  // Bounded semi-spaces and old generation keep the worker's peak RSS low while it drains a large
  // backlog, large events included (bench:worker).
  // --heap-growing-percent=100: with the old generation bounded, V8 grows it only a little past
  // what a mark-compact left live, so under steady load the worker ran full mark-compacts back to
  // back; doubling instead cuts its GC CPU at the same peak RSS (bench:e2e, bench:worker).
  worker: {
    kind: 'worker',
    main: 'services/worker/main.ts',
    nodeArgs: ['--max-semi-space-size=16', '--max-old-space-size=96', '--heap-growing-percent=100', '--concurrent-turbofan-max-threads=1'],
    env: {},
    defaultAdminPort: DEFAULTS.adminPort.worker,
    // On a machine the services share, a busy worker must not hold up the POST -> ack path: a
    // provider waits on the ack (and retries when it is slow), while a reader of the applied topic
    // gets the record a few milliseconds later. At niceness 10 the kernel gives the ingress (and the
    // broker) the CPU first when both want it, and the worker catches up in between (bench:e2e,
    // docs/benchmarks.md). WORKER_NICENESS changes it; 0 runs the worker like the rest.
    niceness: 10,
  },
  // The console has no admin port of its own: this is its web port (CONSOLE_PORT).
  console: {
    kind: 'console',
    main: 'services/console/main.ts',
    nodeArgs: [],
    env: {},
    defaultAdminPort: DEFAULTS.consolePort,
    niceness: 0,
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

/** The niceness a service runs at: its spec's, for the worker WORKER_NICENESS (0 to 19) when set. */
export function serviceNiceness(spec: ServiceSpec, env: NodeJS.ProcessEnv): number {
  const value = spec.kind === 'worker' ? env.WORKER_NICENESS : undefined;
  if (value === undefined || value === '') return spec.niceness;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 19)
    throw new Error(`WORKER_NICENESS must be an integer from 0 to 19, not ${JSON.stringify(value)}`);
  return n;
}

/**
 * Gives a started service its niceness. Raising it needs no privilege; where the platform has no
 * such priority, the service runs at the default.
 */
export function applyNiceness(spec: ServiceSpec, child: ChildProcess, env: NodeJS.ProcessEnv): void {
  const niceness = serviceNiceness(spec, env);
  if (niceness === 0 || child.pid === undefined) return;
  try {
    os.setPriority(child.pid, niceness);
  } catch {
    // runs at the default priority
  }
}

/** Starts the service as a child process (stdout and stderr shared with this one), from the bundle buildServices wrote. */
export function spawnService(spec: ServiceSpec, env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, serviceArgs(spec), {
    cwd: repoRoot,
    env: serviceEnv(spec, env),
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  applyNiceness(spec, child, env);
  return child;
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
