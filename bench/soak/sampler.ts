// One sample of the soak every 10 s: what happened in the window since the previous one (requests,
// answers, applied records and their POST -> applied p99, CPU, the services' event-loop delay) and
// the state at its end (each service's RSS, the worker group's lag on the events topic). The bench's
// own process is sampled too (its event-loop delay, GC pauses and heap): it sends the requests and
// reads the applied records, so a stall of its own counts in every latency it measures.
import type { ChildProcess } from 'node:child_process';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import type { Admin } from '#plumbing/kafka/types.ts';
import { groupLag } from '#plumbing/kafka/lag.ts';
import { cpuSnapshot } from '../lib/cpu.ts';
import { machineCpu, type OtherRunsWatch } from '../lib/machine.ts';
import { procStatusMb } from '../lib/rss.ts';
import { percentile, summarise, type Summary } from '../lib/stats.ts';
import { wallNow } from '../e2e/load.ts';
import type { AppliedLog } from './applied-log.ts';
import type { LoopWindow } from './loop-probe.ts';
import type { SteadyLoad } from './steady-load.ts';

export type SamplePhase = 'warm-up' | 'soak' | 'drain';

export interface LoopDelay {
  p99: number;
  max: number;
}

export interface Sample {
  index: number;
  /** Seconds since the load started (the first due time), when the sample was taken. */
  t: number;
  phase: SamplePhase;
  /** Requests due and sent in the window; answers received in it (2xx, other). */
  sent: number;
  accepted: number;
  rejected: number;
  /** Records received on the applied topic in the window, and POST (due time) -> received of those. */
  applied: number;
  e2e: Summary;
  /** How late the generator sent the window's requests, p99, ms. */
  sendLateP99: number;
  /** The worker group's lag on the events topic (sum over partitions); NaN when the query failed. */
  lag: number;
  rssMb: { ingress: number; worker: number };
  /** Event-loop delay beyond the 10 ms timer period, per thread; undefined when the probe did not answer. */
  loop: { ingress?: LoopDelay; worker?: LoopDelay };
  /** The bench process: event-loop delay beyond the 10 ms timer period, GC pauses in the window (sum and longest), heap used at its end. */
  bench: { loop?: LoopDelay; gcMs: number; gcMaxMs: number; heapMb: number };
  /** CPU over the window, % of one core. */
  cpu: { ingress: number; worker: number; postgres: number; kafka: number; bench: number; machine: number; others: number };
  otherRuns: string[];
}

export interface SamplerOptions {
  load: SteadyLoad;
  applied: AppliedLog;
  admin: Admin;
  group: string;
  topic: string;
  services: { ingress: { pid: number; child: ChildProcess }; worker: { pid: number; child: ChildProcess } };
  otherRuns: OtherRunsWatch;
  phaseOf: (index: number) => SamplePhase;
}

/** Asks a service's loop probe (bench/soak/loop-probe.ts) for its window; undefined after `timeoutMs`. */
function askLoopProbe(child: ChildProcess, timeoutMs = 2000): Promise<LoopWindow[] | undefined> {
  if (!child.connected) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const onMessage = (message: { type?: string; threads?: LoopWindow[] }) => {
      if (message?.type !== 'loop-probe:window') return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(message.threads);
    };
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      resolve(undefined);
    }, timeoutMs);
    child.on('message', onMessage);
    child.send({ type: 'loop-probe:sample' }, (error) => {
      if (error) {
        clearTimeout(timer);
        child.off('message', onMessage);
        resolve(undefined);
      }
    });
  });
}

const delayOf = (w: LoopWindow | undefined): LoopDelay | undefined => (w && w.samples > 0 ? { p99: w.p99, max: w.max } : undefined);

export async function totalLag(admin: Admin, group: string, topic: string): Promise<number> {
  try {
    return (await groupLag(admin, group, topic)).reduce((sum, row) => sum + row.lag, 0);
  } catch {
    return NaN;
  }
}

export class Sampler {
  readonly samples: Sample[] = [];
  readonly #options: SamplerOptions;
  readonly #loop = monitorEventLoopDelay({ resolution: 10 });
  readonly #gc: PerformanceObserver;
  #gcMs = 0;
  #gcMaxMs = 0;
  #previous: {
    counters: SteadyLoad['counters'];
    ingress: number;
    worker: number;
    postgres: number;
    kafka: number;
    bench: NodeJS.CpuUsage;
    machine: number;
    at: number;
  };

  constructor(options: SamplerOptions) {
    this.#options = options;
    this.#loop.enable();
    this.#gc = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        this.#gcMs += entry.duration;
        this.#gcMaxMs = Math.max(this.#gcMaxMs, entry.duration);
      }
    });
    this.#gc.observe({ entryTypes: ['gc'] });
    this.#previous = this.#snapshot();
  }

  #snapshot() {
    const { ingress, worker } = this.#options.services;
    const withIngress = cpuSnapshot(ingress.pid);
    return {
      counters: { ...this.#options.load.counters },
      ingress: withIngress.child,
      worker: cpuSnapshot(worker.pid).child,
      postgres: withIngress.postgres,
      kafka: withIngress.kafka,
      bench: process.cpuUsage(),
      machine: machineCpu().busy,
      at: wallNow(),
    };
  }

  stop(): void {
    this.#loop.disable();
    this.#gc.disconnect();
  }

  #takeBench(): Sample['bench'] {
    const h = this.#loop;
    // The histogram is in ns and includes the 10 ms resolution period itself.
    const loop = h.count > 0 ? { p99: Math.max(0, h.percentile(99) / 1e6 - 10), max: Math.max(0, h.max / 1e6 - 10) } : undefined;
    h.reset();
    const out = { ...(loop ? { loop } : {}), gcMs: this.#gcMs, gcMaxMs: this.#gcMaxMs, heapMb: process.memoryUsage().heapUsed / 2 ** 20 };
    this.#gcMs = 0;
    this.#gcMaxMs = 0;
    return out;
  }

  /** Starts a fresh window (drops what happened so far), e.g. right before the load starts. */
  reset(): void {
    this.#takeApplied();
    this.#takeBench();
    this.#options.load.takeSendLags();
    this.#options.otherRuns.reset();
    void askLoopProbe(this.#options.services.ingress.child);
    void askLoopProbe(this.#options.services.worker.child);
    this.#previous = this.#snapshot();
  }

  #takeApplied(): number[] {
    const { applied, load } = this.#options;
    return applied.take().map((i) => applied.received[i]! - load.requests.due(i));
  }

  async take(): Promise<Sample> {
    const { load, services, admin, group, topic } = this.#options;
    // The counts, CPU and RSS at the grid time; the lag query and the probes' answers follow within ~0.1 s.
    const now = this.#snapshot();
    const before = this.#previous;
    this.#previous = now;
    const rssMb = { ingress: procStatusMb(services.ingress.pid, 'VmRSS'), worker: procStatusMb(services.worker.pid, 'VmRSS') };
    const latencies = this.#takeApplied();
    const bench = this.#takeBench();
    const lags = load.takeSendLags().sort((a, b) => a - b);
    const [lag, ingressLoop, workerLoop] = await Promise.all([
      totalLag(admin, group, topic),
      askLoopProbe(services.ingress.child),
      askLoopProbe(services.worker.child),
    ]);
    const seconds = (now.at - before.at) / 1000;
    const pct = (cpuSeconds: number) => (cpuSeconds / seconds) * 100;
    const benchCpu = (now.bench.user - before.bench.user + now.bench.system - before.bench.system) / 1e6;
    const cpu = {
      ingress: pct(now.ingress - before.ingress),
      worker: pct(now.worker - before.worker),
      postgres: pct(now.postgres - before.postgres),
      kafka: pct(now.kafka - before.kafka),
      bench: pct(benchCpu),
      machine: pct(now.machine - before.machine),
      others: 0,
    };
    cpu.others = Math.max(0, cpu.machine - cpu.ingress - cpu.worker - cpu.postgres - cpu.kafka - cpu.bench);
    const index = this.samples.length + 1;
    const sample: Sample = {
      index,
      t: (now.at - load.started) / 1000,
      phase: this.#options.phaseOf(index),
      sent: now.counters.sent - before.counters.sent,
      accepted: now.counters.accepted - before.counters.accepted,
      rejected: now.counters.rejected - before.counters.rejected,
      applied: latencies.length,
      e2e: summarise(latencies),
      sendLateP99: percentile(lags, 99),
      lag,
      rssMb,
      loop: {
        ingress: delayOf(ingressLoop?.find((w) => w.thread === 'main')),
        worker: delayOf(workerLoop?.find((w) => w.thread === 'main')),
      },
      bench,
      cpu,
      otherRuns: this.#options.otherRuns.seen(),
    };
    this.#options.otherRuns.reset();
    this.samples.push(sample);
    return sample;
  }
}
