// bench:e2e's phases as they run: a bridge phase (open loop at one rate, then drained until every 2xx
// is on the applied topic), the idle window, and a floor phase (bench/e2e/floor.ts). Each returns
// what it measured over the phase: the answers, CPU per process group, peak RSS, other runs seen and
// this process's event-loop delay. Turning those into stages and ledgers is bench/e2e/figures.ts's.
import { monitorEventLoopDelay, type ELDHistogram } from 'node:perf_hooks';
import type { BenchService } from '../lib/bridge.ts';
import { cpuSince, cpuSnapshot, type CpuSnapshot } from '../lib/cpu.ts';
import { machineCpu, type OtherRunsWatch } from '../lib/machine.ts';
import type { RssSampler } from '../lib/rss.ts';
import { fmt } from '../lib/stats.ts';
import type { Floor, FloorPhaseResult } from './floor.ts';
import { openLoop, wallNow, type EventFactory, type PhaseResult } from './load.ts';
import type { AppliedWatch } from './observe.ts';

export interface Phase {
  name: string;
  rate: number;
  load: PhaseResult;
  drainedMs: number;
  drainedAll: boolean;
  cpu: { ingress: number; worker: number; postgres: number; kafka: number; bench: number; machine: number; steal: number; seconds: number };
  otherRuns: string[];
  rssMb: { ingress: number; worker: number };
  benchLoopDelay: { p99: number; max: number };
}

export interface Idle {
  seconds: number;
  ingress: number;
  worker: number;
  postgres: number;
  kafka: number;
  bench: number;
  machine: number;
  otherRuns: string[];
}

export interface FloorPhase {
  result: FloorPhaseResult;
  /** CPU over the phase, CPU seconds: the bench process (producer and reader), the relay process, the broker, the machine. */
  cpu: { bench: number; relay: number; machine: number; kafka: number; seconds: number };
  otherRuns: string[];
}

export interface PhaseSetup {
  ingress: BenchService;
  worker: BenchService;
  ingressPort: number;
  factory: EventFactory;
  applied: AppliedWatch;
  floor: Floor | undefined;
  rss: RssSampler;
  /** Reset at the start of each phase. */
  otherRuns: OtherRunsWatch;
  drainTimeoutMs: number;
  idleMs: number;
  log: (line: string) => void;
}

export class Phases {
  readonly #loopDelay: ELDHistogram;

  constructor(private readonly setup: PhaseSetup) {
    this.#loopDelay = monitorEventLoopDelay({ resolution: 5 });
    this.#loopDelay.enable();
  }

  /** The bridge at `rate` for `durationMs`, then drained: every 2xx of the phase on the applied topic (or the timeout passed). */
  async bridge(name: string, rate: number, durationMs: number): Promise<Phase> {
    const { ingress, worker, rss, otherRuns, log } = this.setup;
    const loopDelay = this.#loopDelay;
    log(`${name}: ${rate} req/s for ${durationMs / 1000} s`);
    const cpuBefore: CpuSnapshot = cpuSnapshot(ingress.pid);
    const workerBefore = cpuSnapshot(worker.pid).child;
    const benchBefore = process.cpuUsage();
    const machineBefore = machineCpu();
    otherRuns.reset();
    const t0 = wallNow();
    rss.window(name);
    loopDelay.reset();
    const load = await openLoop({
      port: this.setup.ingressPort,
      path: '/webhooks/demo',
      rate,
      durationMs,
      phase: name,
      factory: this.setup.factory,
    });
    const loopP99 = loopDelay.percentile(99) / 1e6;
    const loopMax = loopDelay.max / 1e6;
    const accepted = load.sent.filter((s) => s.status >= 200 && s.status < 300).map((s) => s.eventId);
    const drainStart = wallNow();
    let drainedAll = false;
    while (wallNow() - drainStart < this.setup.drainTimeoutMs) {
      if (accepted.every((id) => this.setup.applied.seen.has(id))) {
        drainedAll = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const drainedMs = wallNow() - drainStart;
    rss.sample();
    rss.window(undefined);
    const cpu = cpuSince(cpuBefore, cpuSnapshot(ingress.pid));
    const own = process.cpuUsage(benchBefore);
    const machineAfter = machineCpu();
    const seconds = (wallNow() - t0) / 1000;
    const peaks = rss.peaks();
    const phase: Phase = {
      name,
      rate,
      load,
      drainedMs,
      drainedAll,
      cpu: {
        ingress: cpu.child,
        worker: cpuSnapshot(worker.pid).child - workerBefore,
        postgres: cpu.postgres,
        kafka: cpu.kafka,
        bench: (own.user + own.system) / 1e6,
        machine: machineAfter.busy - machineBefore.busy,
        steal: machineAfter.steal - machineBefore.steal,
        seconds,
      },
      otherRuns: otherRuns.seen(),
      rssMb: { ingress: peaks.ingress!.windows[name] ?? NaN, worker: peaks.worker!.windows[name] ?? NaN },
      benchLoopDelay: { p99: loopP99, max: loopMax },
    };
    log(
      `${name}: ${accepted.length}/${load.sent.length} accepted, ${drainedAll ? 'all' : 'NOT all'} applied within ${fmt(drainedMs / 1000, 1)} s of the last answer`,
    );
    return phase;
  }

  /** CPU over an idle window (no requests), in CPU seconds. */
  async idle(): Promise<Idle> {
    const { ingress, worker, otherRuns } = this.setup;
    const before = cpuSnapshot(ingress.pid);
    const workerBefore = cpuSnapshot(worker.pid).child;
    const benchBefore = process.cpuUsage();
    const machineBefore = machineCpu();
    otherRuns.reset();
    const t0 = wallNow();
    await new Promise((r) => setTimeout(r, this.setup.idleMs));
    const cpu = cpuSince(before, cpuSnapshot(ingress.pid));
    const own = process.cpuUsage(benchBefore);
    return {
      seconds: (wallNow() - t0) / 1000,
      ingress: cpu.child,
      worker: cpuSnapshot(worker.pid).child - workerBefore,
      postgres: cpu.postgres,
      kafka: cpu.kafka,
      bench: (own.user + own.system) / 1e6,
      machine: machineCpu().busy - machineBefore.busy,
      otherRuns: otherRuns.seen(),
    };
  }

  /** The floor (bench/e2e/floor.ts) at `rate` for `durationMs`. */
  async floor(name: string, rate: number, durationMs: number): Promise<FloorPhase> {
    const { ingress, otherRuns, log } = this.setup;
    const floor = this.setup.floor!;
    log(`${name}: ${rate} records/s for ${durationMs / 1000} s`);
    const before = cpuSnapshot(ingress.pid);
    const relayBefore = cpuSnapshot(floor.relayPid).child;
    const benchBefore = process.cpuUsage();
    const machineBefore = machineCpu();
    otherRuns.reset();
    const t0 = wallNow();
    const result = await floor.phase(name, rate, durationMs);
    const own = process.cpuUsage(benchBefore);
    return {
      result,
      cpu: {
        bench: (own.user + own.system) / 1e6,
        relay: cpuSnapshot(floor.relayPid).child - relayBefore,
        machine: machineCpu().busy - machineBefore.busy,
        kafka: cpuSince(before, cpuSnapshot(ingress.pid)).kafka,
        seconds: (wallNow() - t0) / 1000,
      },
      otherRuns: otherRuns.seen(),
    };
  }
}
