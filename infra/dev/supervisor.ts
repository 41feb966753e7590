// Keeps one service process running, the way an operator's supervisor would (systemd
// Restart=always, a Kubernetes restart policy): a process that exits without being asked to is
// started again after a capped exponential backoff, and the backoff starts over once a run has
// lasted long enough. Spawning, timers and the log are injected, so the policy is tested without
// processes or real time (supervisor.test.ts).

export interface BackoffPolicy {
  /** Delay before the first restart of a run of failures. */
  initialDelayMs: number;
  /** Each further failure in a row multiplies the delay by this... */
  factor: number;
  /** ...up to this cap. */
  maxDelayMs: number;
  /** A process that stayed up this long was healthy: its exit starts the backoff over. */
  resetAfterMs: number;
}

export const defaultBackoff: BackoffPolicy = { initialDelayMs: 1000, factor: 2, maxDelayMs: 30_000, resetAfterMs: 60_000 };

/** Delay before restart after the `failuresInARow`-th failure in a row (1-based): 1 s, 2 s, 4 s, ... 30 s. */
export function restartDelayMs(failuresInARow: number, policy: BackoffPolicy = defaultBackoff): number {
  const exponent = Math.max(0, failuresInARow - 1);
  return Math.min(policy.maxDelayMs, Math.round(policy.initialDelayMs * policy.factor ** exponent));
}

/** What the supervisor needs of a running process. */
export interface SupervisedProcess {
  readonly pid: number | undefined;
  kill(signal: NodeJS.Signals): void;
  /** Called exactly once, when the process has exited (or could not be started: code and signal null). */
  onExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void;
}

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** The subset of a pino logger the supervisor writes to. */
export interface SupervisorLog {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
  error(fields: object, msg: string): void;
}

export interface SupervisorOptions {
  /** The service's name in log lines (field `child`; `service` is the supervisor's own logger name). */
  name: string;
  spawn: () => SupervisedProcess;
  log: SupervisorLog;
  policy?: BackoffPolicy;
  clock?: Clock;
  /** On stop: SIGTERM, then SIGKILL when the process is still there after this long. */
  killAfterMs?: number;
}

export type SupervisorState = 'idle' | 'running' | 'waiting' | 'stopping' | 'stopped';

export class Supervisor {
  private readonly policy: BackoffPolicy;
  private readonly clock: Clock;
  private readonly killAfterMs: number;
  private current: SupervisedProcess | undefined;
  private startedAt = 0;
  private restartTimer: unknown;
  private stopped: Promise<void> | undefined;
  private resolveStopped: (() => void) | undefined;
  private _state: SupervisorState = 'idle';
  /** Processes started so far (the first start included). */
  starts = 0;
  /** Restarts so far (starts after an unrequested exit). */
  restarts = 0;
  /** Failures since the last run that lasted `resetAfterMs`; sets the next delay. */
  failuresInARow = 0;

  constructor(private readonly options: SupervisorOptions) {
    this.policy = options.policy ?? defaultBackoff;
    this.clock = options.clock ?? systemClock;
    this.killAfterMs = options.killAfterMs ?? 15_000;
  }

  get state(): SupervisorState {
    return this._state;
  }

  /** The running process's pid (undefined while waiting to restart or stopped). */
  get pid(): number | undefined {
    return this.current?.pid;
  }

  start(): void {
    if (this._state !== 'idle') throw new Error(`${this.options.name}: already started`);
    this.launch();
  }

  private launch(): void {
    const { name, log } = this.options;
    const restart = this.starts > 0;
    this.starts += 1;
    if (restart) this.restarts += 1;
    this._state = 'running';
    this.startedAt = this.clock.now();
    const child = this.options.spawn();
    this.current = child;
    log.info(
      { child: name, pid: child.pid, starts: this.starts, restarts: this.restarts },
      restart ? `${name} restarted (pid ${child.pid}, restart ${this.restarts})` : `${name} started (pid ${child.pid})`,
    );
    child.onExit((code, signal) => this.exited(child, code, signal));
  }

  private exited(child: SupervisedProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.current) return;
    this.current = undefined;
    const { name, log } = this.options;
    const uptimeMs = this.clock.now() - this.startedAt;
    const how = signal ? `signal ${signal}` : `code ${code}`;
    if (this._state === 'stopping') {
      log.info({ child: name, pid: child.pid, code, signal, uptime_ms: uptimeMs }, `${name} stopped (${how})`);
      this.finishStop();
      return;
    }
    // A run that lasted resetAfterMs was healthy: this failure is the first of a new series.
    this.failuresInARow = uptimeMs >= this.policy.resetAfterMs ? 1 : this.failuresInARow + 1;
    const delayMs = restartDelayMs(this.failuresInARow, this.policy);
    log.error(
      {
        child: name,
        pid: child.pid,
        code,
        signal,
        uptime_ms: uptimeMs,
        restart: this.restarts + 1,
        failures_in_a_row: this.failuresInARow,
        delay_ms: delayMs,
      },
      `${name} exited (${how}) after ${uptimeMs} ms; restart ${this.restarts + 1} in ${delayMs} ms`,
    );
    this._state = 'waiting';
    this.restartTimer = this.clock.setTimeout(() => {
      this.restartTimer = undefined;
      if (this._state !== 'waiting') return;
      log.warn(
        { child: name, restart: this.restarts + 1, delay_ms: delayMs },
        `restarting ${name} (restart ${this.restarts + 1}, after ${delayMs} ms)`,
      );
      this.launch();
    }, delayMs);
  }

  /**
   * Stops for good: a pending restart is cancelled, a running process gets `signal` (SIGKILL after
   * killAfterMs) and is never started again. Resolves once no process is left.
   */
  stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (this.stopped) return this.stopped;
    this.stopped = new Promise<void>((resolve) => (this.resolveStopped = resolve));
    if (this.restartTimer !== undefined) {
      this.clock.clearTimeout(this.restartTimer);
      this.restartTimer = undefined;
    }
    const child = this.current;
    if (!child) {
      this.finishStop();
      return this.stopped;
    }
    this._state = 'stopping';
    child.kill(signal);
    const killTimer = this.clock.setTimeout(() => {
      if (this.current === child) {
        this.options.log.warn(
          { child: this.options.name, pid: child.pid },
          `${this.options.name} still running after ${this.killAfterMs} ms; SIGKILL`,
        );
        child.kill('SIGKILL');
      }
    }, this.killAfterMs);
    void this.stopped.then(() => this.clock.clearTimeout(killTimer));
    return this.stopped;
  }

  private finishStop(): void {
    this._state = 'stopped';
    this.resolveStopped?.();
  }
}
