// What else the machine was doing during a benchmark: busy CPU of all cores from /proc/stat (so a
// benchmark can report the share that none of its own processes used), and a watch for other test
// or benchmark runs (vitest, tsc, eslint, another bench) by command line. Linux only.
import { createHmac } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

export interface MachineCpu {
  /** CPU seconds all cores spent busy (user, nice, system, irq, softirq). */
  busy: number;
  /** CPU seconds the hypervisor gave to others while this machine wanted to run (steal). */
  steal: number;
}

export function machineCpu(): MachineCpu {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal
    const busy = f[0]! + f[1]! + f[2]! + f[5]! + f[6]!;
    return { busy: busy / TICKS_PER_SECOND, steal: (f[7] ?? 0) / TICKS_PER_SECOND };
  } catch {
    return { busy: NaN, steal: NaN };
  }
}

const OTHER_RUNS = /\b(vitest|tsc|eslint|bench\/[\w-]+\/run\.ts|bench:[\w-]+)\b/;

/** Command lines of other test, typecheck, lint or benchmark processes (not `exclude`d pids). */
export function otherRuns(exclude: ReadonlySet<number>): string[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e) || exclude.has(Number(e))) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      const match = OTHER_RUNS.exec(cmd);
      if (match) found.push(match[1]!);
    } catch {
      // gone
    }
  }
  return found;
}

/** Samples otherRuns every `intervalMs`; `seen()` is the set of kinds found since the last reset. */
export class OtherRunsWatch {
  readonly #timer: NodeJS.Timeout;
  #seen = new Set<string>();

  constructor(exclude: () => ReadonlySet<number>, intervalMs = 1000) {
    const sample = () => {
      for (const kind of otherRuns(exclude())) this.#seen.add(kind);
    };
    sample();
    this.#timer = setInterval(sample, intervalMs);
    this.#timer.unref();
  }

  reset(): void {
    this.#seen = new Set();
  }

  seen(): string[] {
    return [...this.#seen].sort();
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/**
 * How fast this machine runs a fixed piece of the bridge's own work right now: milliseconds for
 * 20,000 rounds of HMAC-SHA256 over a 1 KiB body plus JSON.parse and JSON.stringify of it, on one
 * core, best of three. Absolute latencies and rates from different hours compare only through a
 * figure like this one: on a shared machine the speed of a core moves from hour to hour.
 */
export function cpuCalibrationMs(): number {
  const body = JSON.stringify({ event_id: 'evt_calibration', data: { text: 'x'.repeat(960) } });
  const key = Buffer.from('calibration-secret');
  let best = Infinity;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const started = performance.now();
    let sink = 0;
    for (let i = 0; i < 20_000; i += 1) {
      sink += createHmac('sha256', key).update(body).digest()[0]!;
      sink += JSON.stringify(JSON.parse(body)).length;
    }
    if (sink < 0) throw new Error('unreachable');
    best = Math.min(best, performance.now() - started);
  }
  return Math.round(best);
}
