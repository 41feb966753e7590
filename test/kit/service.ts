// A service run as its own process, as deployed: its bundle (test/global-setup.ts builds them) under
// the production Node flags and environment that `npm start` uses (serviceSpecs), so the tests see
// the heap bounds and compiler threads that production has.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { sleep } from './eventually.ts';
import { suiteFixture, type FixtureOptions } from './fixture.ts';
import { bundlePath, repoRoot, serviceSpecs, type ServiceKind } from './infra.ts';

export interface ServiceProcess {
  child: ChildProcess;
  /** Exit code and signal, once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Its stdout so far (JSON log lines). */
  stdout: () => string;
  /** Its stderr so far. */
  stderr: () => string;
  /** stdout and stderr so far. */
  output: () => string;
  /**
   * The first log line whose msg is `message` (and, given `where`, whose fields match it), parsed;
   * waits for it (60 s), fails if the process exits first. The services hold log lines up to
   * 100 ms before writing them (LOG_BUFFER_BYTES), so a line is never read as soon as its request
   * was answered: wait for it here.
   */
  line: (message: string, where?: (fields: Record<string, unknown>) => boolean) => Promise<Record<string, unknown>>;
  /** The admin port, from the admin server's "listening" line. */
  adminPort: () => Promise<number>;
  /** SIGTERM, and wait for the exit. */
  stop: () => Promise<void>;
}

/** A command that starts the service in place of its development bundle (a release build's launcher). */
export interface ServiceCommand {
  command: string;
  cwd: string;
}

export interface SpawnOptions {
  /** Run a release build's launcher instead of the bundle (it sets its own flags). */
  from?: ServiceCommand;
  /** Keep only the last this many characters of each output (long runs that restart often). */
  keepChars?: number;
}

/**
 * Starts `kind` with exactly `env` (plus PATH; pass `...process.env` to inherit) over the spec's
 * own environment (a launcher brings its own).
 */
export function spawnService(
  kind: ServiceKind,
  env: Record<string, string | undefined>,
  { from, keepChars = Infinity }: SpawnOptions = {},
): ServiceProcess {
  const spec = serviceSpecs[kind];
  const [command, args] = from === undefined ? [process.execPath, [...spec.nodeArgs, bundlePath(spec.main)]] : [from.command, []];
  const child = spawn(command, args, {
    cwd: from?.cwd ?? repoRoot,
    env: { PATH: process.env.PATH ?? '', ...(from === undefined ? spec.env : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let all = '';
  const keep = (text: string, more: Buffer) => {
    const joined = text + more.toString();
    return joined.length > keepChars ? joined.slice(-keepChars) : joined;
  };
  child.stdout!.on('data', (c: Buffer) => {
    stdout = keep(stdout, c);
    all = keep(all, c);
  });
  child.stderr!.on('data', (c: Buffer) => {
    stderr = keep(stderr, c);
    all = keep(all, c);
  });
  const exited = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  const line = async (message: string, where?: (fields: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const found = stdout
        .split('\n')
        .filter((l) => l.includes(`"msg":"${message}"`))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((fields) => where === undefined || where(fields));
      if (found) return found;
      // Not eventually(): an exited process fails at once rather than after the timeout.
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${kind}: no "${message}" line:\n${all}`);
      await sleep(50);
    }
  };
  return {
    child,
    exited,
    stdout: () => stdout,
    stderr: () => stderr,
    output: () => all,
    line,
    adminPort: async () => (await line('admin server listening')).port as number,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** Whether a service's admin port answers /readyz with 200 now (false while nothing listens there). */
export async function adminReady(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2000) });
    await res.text();
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * A service process for the suite: started before its first test, with the environment `env` gives
 * then, and ready once it logged `until` (if given); stopped after its last test.
 */
export function useService(
  kind: ServiceKind,
  env: () => Record<string, string | undefined>,
  { until, ...fixture }: { until?: string } & FixtureOptions = {},
): ServiceProcess {
  return suiteFixture(
    async () => {
      const service = spawnService(kind, env());
      try {
        if (until !== undefined) await service.line(until);
      } catch (error) {
        await service.stop();
        throw error;
      }
      return service;
    },
    (service) => service.stop(),
    fixture,
  );
}
