// Resident memory of processes from /proc/<pid>/status, sampled on a timer: the peak of VmRSS over
// the samples (per named window as well as overall) and the kernel's own high-water mark (VmHWM).
// Linux only; elsewhere every figure reads NaN.
import { readFileSync } from 'node:fs';

/** A line of /proc/<pid>/status in MiB (`VmRSS`, `VmHWM`, ...); NaN when the process or the field is gone. */
export function procStatusMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1];
    return kb === undefined ? NaN : Number(kb) / 1024;
  } catch {
    return NaN;
  }
}

export interface RssPeaks {
  /** Peak sampled VmRSS over the whole sampling, MiB. */
  peakMb: number;
  /** Peak sampled VmRSS per window (see RssSampler.window), MiB. */
  windows: Record<string, number>;
  samples: number;
}

/** Samples VmRSS of named processes every `intervalMs` until stop(). */
export class RssSampler {
  readonly #pids: Record<string, number>;
  readonly #timer: NodeJS.Timeout;
  readonly #peaks: Record<string, RssPeaks> = {};
  #window: string | undefined;

  constructor(pids: Record<string, number>, intervalMs = 200) {
    this.#pids = pids;
    for (const name of Object.keys(pids)) this.#peaks[name] = { peakMb: 0, windows: {}, samples: 0 };
    this.sample();
    this.#timer = setInterval(() => this.sample(), intervalMs);
    this.#timer.unref();
  }

  /** Later samples also count toward the window `name` (until the next call; undefined ends it). */
  window(name: string | undefined): void {
    this.#window = name;
  }

  sample(): void {
    for (const [name, pid] of Object.entries(this.#pids)) {
      const mb = procStatusMb(pid, 'VmRSS');
      if (!Number.isFinite(mb)) continue;
      const peaks = this.#peaks[name]!;
      peaks.samples += 1;
      peaks.peakMb = Math.max(peaks.peakMb, mb);
      if (this.#window !== undefined) peaks.windows[this.#window] = Math.max(peaks.windows[this.#window] ?? 0, mb);
    }
  }

  /** The peaks so far, per process name. */
  peaks(): Record<string, RssPeaks> {
    return structuredClone(this.#peaks);
  }

  stop(): Record<string, RssPeaks> {
    clearInterval(this.#timer);
    this.sample();
    return this.peaks();
  }
}
