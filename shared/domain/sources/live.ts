// Sources from Postgres, kept current while a service runs. A write notifies channel bridge_config
// at its commit (LISTEN answers within milliseconds); a cheap check of the version every pollMs
// catches a lost notification or a LISTEN connection that died. The set a service serves is
// replaced whole, at once, between requests. Postgres is never on a request's path: when it is
// unreachable the service keeps serving the set it has and says so in its log and metrics.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import pg from 'pg';
import type { Pool } from 'pg';
import type { Logger } from '#plumbing/logging/logger.ts';
import type { SigningSecret } from '#domain/signing/index.ts';
import { CONFIG_CHANNEL, readConfigSnapshot, readConfigVersion, recordSecretUses, reportInstance } from '#domain/store/sources.ts';
import { openSecret, type SecretKeyring } from './secret-box.ts';
import { storedSourceSchema, toWebhookSource, type StoredSource } from './source-spec.ts';
import type { WebhookSource } from './sources-config.ts';

/** One consistent read of the configuration: the enabled sources with their secrets opened. */
export interface LiveSnapshot {
  version: number;
  sources: WebhookSource[];
  specs: StoredSource[];
  /** Secrets or sources left out (a key this service lacks, a row that does not open), named, never valued. */
  problems: string[];
}

export interface LoadOptions {
  /** false: no secret is read or opened (a worker verifies nothing); the sources carry none. Default true. */
  secrets?: boolean;
}

export async function loadLiveSnapshot(pool: Pool, keyring: SecretKeyring | undefined, options: LoadOptions = {}): Promise<LiveSnapshot> {
  const withSecrets = options.secrets !== false;
  const { version, rows, secrets } = await readConfigSnapshot(pool, { secrets: withSecrets });
  const problems: string[] = [];
  const sources: WebhookSource[] = [];
  const specs: StoredSource[] = [];
  for (const row of rows) {
    if (!row.enabled) continue;
    let spec: StoredSource;
    try {
      spec = storedSourceSchema.parse(row.spec);
    } catch (error) {
      problems.push(`source "${row.id}" is left out: its stored spec is invalid (${(error as Error).message})`);
      continue;
    }
    const opened: SigningSecret[] = [];
    for (const s of secrets) {
      if (s.sourceId !== row.id) continue;
      if (keyring === undefined) {
        problems.push(`secret "${s.secretId}" of source "${row.id}" is left out: BRIDGE_SECRET_KEYS is not set`);
        continue;
      }
      try {
        const value = openSecret(keyring, s.sourceId, s.secretId, s.keyId, s.sealed);
        opened.push({ id: s.secretId, value, ...(s.retireAfter === null ? {} : { retireAfter: s.retireAfter }) });
      } catch (error) {
        problems.push(`${(error as Error).message}: left out`);
      }
    }
    try {
      sources.push(toWebhookSource(spec, opened));
      specs.push(spec);
    } catch (error) {
      problems.push(`source "${row.id}" is left out: ${(error as Error).message}`);
    }
  }
  return { version, sources, specs, problems };
}

export interface LiveSourcesOptions {
  pool: Pool;
  /** For the LISTEN connection (a pooled connection cannot hold a LISTEN). */
  databaseUrl: string;
  keyring: SecretKeyring | undefined;
  logger: Logger;
  /** 'ingress' or 'worker': what the instance row and the log say. */
  role: string;
  /** Called with each new snapshot, the first one included; it must not throw. */
  onSnapshot: (snapshot: LiveSnapshot) => void;
  pollMs?: number;
  /** How often this instance writes the version it serves, and flushes secret uses. */
  reportMs?: number;
  /** false: load the sources without their secrets (see LoadOptions); default true. */
  secrets?: boolean;
}

export const DEFAULT_CONFIG_POLL_MS = 1000;
const DEFAULT_REPORT_MS = 5000;

export class LiveSources {
  readonly instance = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  readonly #options: LiveSourcesOptions;
  #version = -1;
  #listener: pg.Client | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #reportTimer: NodeJS.Timeout | undefined;
  #loading: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  /** The wait before the next first-load attempt; stop() ends it at once. */
  #retryWait: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  #healthy = false;
  #uses = new Map<string, { sourceId: string; secretId: string; at: Date }>();

  constructor(options: LiveSourcesOptions) {
    this.#options = options;
  }

  /** The configuration version served; -1 before the first load. */
  get version(): number {
    return this.#version;
  }

  /** Whether the last check reached Postgres. */
  get healthy(): boolean {
    return this.#healthy;
  }

  /** Records that a secret verified a request; flushed to Postgres every reportMs, best effort. */
  noteUse(sourceId: string, secretId: string): void {
    this.#uses.set(`${sourceId}\u0000${secretId}`, { sourceId, secretId, at: new Date() });
  }

  /**
   * Loads the first snapshot, retrying every pollMs until Postgres answers (logging each failure:
   * a service started while Postgres is down says so and serves nothing until it has its sources),
   * then listens and polls.
   */
  async start(): Promise<void> {
    const pollMs = this.#options.pollMs ?? DEFAULT_CONFIG_POLL_MS;
    for (let attempt = 1; !this.#stopped; attempt += 1) {
      try {
        // Listening before the load: a write committed between the two is heard, not missed.
        await this.#listen().catch(() => {});
        await this.#reload(true);
        break;
      } catch (error) {
        this.#options.logger.error(
          { err: error, attempt },
          'sources: cannot load them from Postgres; serving none until it answers (no last known set is kept on disk)',
        );
        await new Promise<void>((resolve) => {
          this.#retryWait = { timer: setTimeout(resolve, Math.min(pollMs * attempt, 5000)), resolve };
        });
      }
    }
    if (this.#stopped) return;
    this.#pollTimer = setInterval(() => void this.#check(), pollMs);
    this.#pollTimer.unref();
    this.#reportTimer = setInterval(() => void this.#report(), this.#options.reportMs ?? DEFAULT_REPORT_MS);
    this.#reportTimer.unref();
    void this.#report();
  }

  async #listen(): Promise<void> {
    if (this.#stopped || this.#listener !== undefined) return;
    const client = new pg.Client({
      connectionString: this.#options.databaseUrl,
      application_name: `bridge-${this.#options.role}-config`,
      keepAlive: true,
    });
    this.#listener = client;
    client.on('error', (error) => {
      this.#options.logger.warn({ err: error }, 'sources: the LISTEN connection failed; polling until it is back');
      if (this.#listener === client) this.#listener = undefined;
      void client.end().catch(() => {});
    });
    client.on('notification', (message) => {
      if (message.channel === CONFIG_CHANNEL && Number(message.payload) !== this.#version) void this.#reloadSoon();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CONFIG_CHANNEL}`);
    } catch (error) {
      if (this.#listener === client) this.#listener = undefined;
      void client.end().catch(() => {});
      throw error;
    }
  }

  async #check(): Promise<void> {
    try {
      if (this.#listener === undefined) await this.#listen();
      const version = await readConfigVersion(this.#options.pool);
      this.#healthy = true;
      if (version !== this.#version) await this.#reloadSoon();
    } catch (error) {
      if (this.#healthy)
        this.#options.logger.warn({ err: error }, 'sources: Postgres unreachable; serving the sources loaded at version ' + this.#version);
      this.#healthy = false;
    }
  }

  /** One load at a time; a notification during a load asks for one more after it. */
  async #reloadSoon(): Promise<void> {
    if (this.#loading) {
      this.#again = true;
      return this.#loading;
    }
    this.#loading = (async () => {
      try {
        do {
          this.#again = false;
          await this.#reload(false);
        } while (this.#again && !this.#stopped);
      } catch (error) {
        this.#options.logger.warn({ err: error }, 'sources: reload failed; serving version ' + this.#version);
      } finally {
        this.#loading = undefined;
      }
    })();
    return this.#loading;
  }

  async #reload(first: boolean): Promise<void> {
    const snapshot = await loadLiveSnapshot(this.#options.pool, this.#options.keyring, { secrets: this.#options.secrets ?? true });
    this.#healthy = true;
    if (!first && snapshot.version === this.#version) return;
    for (const problem of snapshot.problems) this.#options.logger.error({ version: snapshot.version }, `sources: ${problem}`);
    const from = this.#version;
    this.#version = snapshot.version;
    this.#options.onSnapshot(snapshot);
    this.#options.logger.info({ from, version: snapshot.version, sources: snapshot.sources.map((s) => s.id) }, 'sources loaded');
  }

  async #report(): Promise<void> {
    const uses = [...this.#uses.values()];
    this.#uses.clear();
    try {
      await recordSecretUses(this.#options.pool, uses);
      await reportInstance(this.#options.pool, { instance: this.instance, role: this.#options.role, configVersion: this.#version });
    } catch {
      // Best effort: the uses come back for the next flush; Postgres being away is logged by #check.
      for (const use of uses)
        if (!this.#uses.has(`${use.sourceId}\u0000${use.secretId}`)) this.#uses.set(`${use.sourceId}\u0000${use.secretId}`, use);
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#retryWait) {
      clearTimeout(this.#retryWait.timer);
      this.#retryWait.resolve();
    }
    clearInterval(this.#pollTimer);
    clearInterval(this.#reportTimer);
    await this.#loading?.catch(() => {});
    await this.#report().catch(() => {});
    const listener = this.#listener;
    this.#listener = undefined;
    await listener?.end().catch(() => {});
  }
}
