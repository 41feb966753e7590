import { describe, expect, it } from 'vitest';
import { defaultBackoff, restartDelayMs, Supervisor, type Clock, type SupervisedProcess, type SupervisorLog } from './supervisor.ts';

/** Time moves only when the test says so. */
class FakeClock implements Clock {
  time = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();
  private nextId = 1;
  now(): number {
    return this.time;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  get pending(): number[] {
    return [...this.timers.values()].map((t) => t.at - this.time).sort((a, b) => a - b);
  }
  advance(ms: number): void {
    const until = this.time + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.time = due[1].at;
      due[1].fn();
    }
    this.time = until;
  }
}

class FakeProcess implements SupervisedProcess {
  signals: NodeJS.Signals[] = [];
  private listener: ((code: number | null, signal: NodeJS.Signals | null) => void) | undefined;
  constructor(readonly pid: number) {}
  kill(signal: NodeJS.Signals): void {
    this.signals.push(signal);
  }
  onExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void {
    this.listener = listener;
  }
  exit(code: number | null, signal: NodeJS.Signals | null = null): void {
    this.listener?.(code, signal);
  }
}

function setup(killAfterMs = 15_000) {
  const clock = new FakeClock();
  const processes: FakeProcess[] = [];
  const lines: Array<{ level: string; fields: Record<string, unknown>; msg: string }> = [];
  const record = (level: string) => (fields: object, msg: string) => lines.push({ level, fields: fields as Record<string, unknown>, msg });
  const log: SupervisorLog = { info: record('info'), warn: record('warn'), error: record('error') };
  const supervisor = new Supervisor({
    name: 'worker',
    clock,
    log,
    killAfterMs,
    spawn: () => {
      const p = new FakeProcess(1000 + processes.length);
      processes.push(p);
      return p;
    },
  });
  const last = () => processes[processes.length - 1]!;
  return { clock, processes, lines, supervisor, last };
}

describe('restartDelayMs', () => {
  it('doubles from 1 s and stops at 30 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map((n) => restartDelayMs(n))).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
    expect(restartDelayMs(1000)).toBe(defaultBackoff.maxDelayMs);
  });
});

describe('Supervisor', () => {
  it('restarts a process that died, after the backoff delay, and logs the exit and the restart', () => {
    const { clock, processes, lines, supervisor, last } = setup();
    supervisor.start();
    expect(processes).toHaveLength(1);
    expect(supervisor.pid).toBe(1000);
    clock.advance(5000);
    last().exit(null, 'SIGKILL');
    expect(supervisor.state).toBe('waiting');
    expect(supervisor.pid).toBeUndefined();
    const exit = lines.find((l) => l.level === 'error')!;
    expect(exit.fields).toMatchObject({
      child: 'worker',
      pid: 1000,
      code: null,
      signal: 'SIGKILL',
      uptime_ms: 5000,
      restart: 1,
      delay_ms: 1000,
    });
    expect(exit.msg).toBe('worker exited (signal SIGKILL) after 5000 ms; restart 1 in 1000 ms');

    clock.advance(999);
    expect(processes).toHaveLength(1);
    clock.advance(1);
    expect(processes).toHaveLength(2);
    expect(supervisor.state).toBe('running');
    expect(supervisor.pid).toBe(1001);
    expect(supervisor.starts).toBe(2);
    expect(supervisor.restarts).toBe(1);
    expect(lines.map((l) => l.msg)).toEqual([
      'worker started (pid 1000)',
      'worker exited (signal SIGKILL) after 5000 ms; restart 1 in 1000 ms',
      'restarting worker (restart 1, after 1000 ms)',
      'worker restarted (pid 1001, restart 1)',
    ]);
  });

  it('backs off exponentially while the process keeps failing, capped at 30 s', () => {
    const { clock, processes, lines, supervisor, last } = setup();
    supervisor.start();
    const delays: number[] = [];
    for (let i = 0; i < 8; i += 1) {
      clock.advance(100);
      last().exit(1);
      delays.push(clock.pending[0]!);
      clock.advance(clock.pending[0]!);
    }
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
    expect(processes).toHaveLength(9);
    expect(supervisor.restarts).toBe(8);
    expect(lines.filter((l) => l.level === 'error').map((l) => l.fields.code)).toEqual(Array(8).fill(1));
  });

  it('starts the backoff over once a run lasted resetAfterMs (60 s)', () => {
    const { clock, supervisor, last } = setup();
    supervisor.start();
    for (let i = 0; i < 3; i += 1) {
      last().exit(1);
      clock.advance(clock.pending[0]!);
    }
    expect(supervisor.failuresInARow).toBe(3);
    clock.advance(59_999);
    last().exit(1);
    expect(clock.pending).toEqual([8000]);
    clock.advance(8000);
    clock.advance(60_000);
    last().exit(1);
    expect(supervisor.failuresInARow).toBe(1);
    expect(clock.pending).toEqual([1000]);
  });

  it('restarts after a clean exit nobody asked for too (restart always)', () => {
    const { clock, processes, supervisor, last } = setup();
    supervisor.start();
    last().exit(0);
    clock.advance(1000);
    expect(processes).toHaveLength(2);
  });

  it('stop sends SIGTERM, restarts nothing and resolves when the process has exited', async () => {
    const { clock, processes, lines, supervisor, last } = setup();
    supervisor.start();
    let stopped = false;
    const stopping = supervisor.stop().then(() => (stopped = true));
    expect(last().signals).toEqual(['SIGTERM']);
    expect(supervisor.state).toBe('stopping');
    await Promise.resolve();
    expect(stopped).toBe(false);
    last().exit(0);
    await stopping;
    expect(supervisor.state).toBe('stopped');
    clock.advance(120_000);
    expect(processes).toHaveLength(1);
    expect(lines.at(-1)!.msg).toBe('worker stopped (code 0)');
    expect(clock.pending).toEqual([]);
  });

  it('stop sends the signal it is given', async () => {
    const { supervisor, last } = setup();
    supervisor.start();
    const stopping = supervisor.stop('SIGINT');
    expect(last().signals).toEqual(['SIGINT']);
    last().exit(0);
    await stopping;
  });

  it('stop while a restart is pending cancels it', async () => {
    const { clock, processes, supervisor, last } = setup();
    supervisor.start();
    last().exit(null, 'SIGSEGV');
    expect(clock.pending).toEqual([1000]);
    await supervisor.stop();
    expect(supervisor.state).toBe('stopped');
    expect(clock.pending).toEqual([]);
    clock.advance(60_000);
    expect(processes).toHaveLength(1);
  });

  it('stop escalates to SIGKILL when SIGTERM is not enough', async () => {
    const { clock, supervisor, last } = setup(15_000);
    supervisor.start();
    const stopping = supervisor.stop();
    clock.advance(14_999);
    expect(last().signals).toEqual(['SIGTERM']);
    clock.advance(1);
    expect(last().signals).toEqual(['SIGTERM', 'SIGKILL']);
    last().exit(null, 'SIGKILL');
    await stopping;
    expect(supervisor.state).toBe('stopped');
  });

  it('an exit during stop is not a crash, and stop is idempotent', async () => {
    const { clock, processes, lines, supervisor, last } = setup();
    supervisor.start();
    const a = supervisor.stop();
    const b = supervisor.stop();
    expect(a).toBe(b);
    last().exit(1);
    await a;
    clock.advance(60_000);
    expect(processes).toHaveLength(1);
    expect(lines.some((l) => l.level === 'error')).toBe(false);
  });

  it('a process that could not be started counts as a failure and is retried', () => {
    const { clock, processes, lines, supervisor, last } = setup();
    supervisor.start();
    last().exit(null, null);
    expect(lines.at(-1)!.msg).toBe('worker exited (code null) after 0 ms; restart 1 in 1000 ms');
    clock.advance(1000);
    expect(processes).toHaveLength(2);
  });
});
