import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { repoRoot } from '../../infra/paths.ts';
import { bundlePath } from '../../infra/build/build.ts';

/** A service (services/<name>/main.ts) run as its own process, as npm start runs it. */
export interface ServiceProcess {
  child: ChildProcess;
  /** Its stdout so far (JSON log lines). */
  stdout: () => string;
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

export function startServiceProcess(main: string, env: Record<string, string>, from?: ServiceCommand): ServiceProcess {
  // From its bundle, as npm start runs it (test/global-setup.ts builds the bundles).
  const [command, args] = from === undefined ? [process.execPath, [bundlePath(main)]] : [from.command, []];
  const child = spawn(command, args, {
    cwd: from?.cwd ?? repoRoot,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let all = '';
  child.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
    all += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => (all += c.toString()));
  const exited = once(child, 'exit');
  const line = async (message: string, where?: (fields: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const found = stdout
        .split('\n')
        .filter((l) => l.includes(`"msg":"${message}"`))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((fields) => where === undefined || where(fields));
      if (found) return found;
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${main}: no "${message}" line:\n${all}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return {
    child,
    stdout: () => stdout,
    output: () => all,
    line,
    adminPort: async () => (await line('admin server listening')).port as number,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}
