// CPU time of whole process groups from /proc, so a benchmark can say where the cores went:
// the broker (java), Postgres (the postmaster plus every backend, live or already exited) and a
// child process of the benchmark. Linux only; on other systems every figure reads 0.
import { readFileSync, readdirSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

interface ProcStat {
  pid: number;
  ppid: number;
  comm: string;
  /** Own user + system CPU, seconds. */
  own: number;
  /** CPU of children this process has reaped (e.g. exited Postgres backends), seconds. */
  reaped: number;
  /** When it started, seconds after the machine booted. */
  startedAfterBoot: number;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    const comm = text.slice(text.indexOf('(') + 1, close);
    const f = text.slice(close + 2).split(' ');
    // After "(comm) ": state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14) ... starttime(19)
    return {
      pid,
      ppid: Number(f[1]),
      comm,
      own: (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND,
      reaped: (Number(f[13]) + Number(f[14])) / TICKS_PER_SECOND,
      startedAfterBoot: Number(f[19]) / TICKS_PER_SECOND,
    };
  } catch {
    return undefined;
  }
}

function allProcesses(): ProcStat[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  return entries.filter((e) => /^\d+$/.test(e)).flatMap((e) => readStat(Number(e)) ?? []);
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

const isBroker = (p: ProcStat) => p.comm === 'java' && cmdline(p.pid).includes('kafka.Kafka');

/**
 * How long the local broker has run and the CPU it has used: a broker started minutes before a
 * benchmark is still compiling its hot paths, and uses more CPU and answers slower than it will
 * once warm. Undefined when no local broker process is found (a remote one).
 */
export function brokerAge(): { uptimeSeconds: number; cpuSeconds: number } | undefined {
  const broker = allProcesses().find(isBroker);
  if (broker === undefined) return undefined;
  const uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  return { uptimeSeconds: uptime - broker.startedAfterBoot, cpuSeconds: broker.own };
}

export interface CpuSnapshot {
  kafka: number;
  postgres: number;
  child: number;
}

/** CPU seconds used so far by the broker, Postgres and (optionally) one child process tree. */
export function cpuSnapshot(childPid?: number): CpuSnapshot {
  const procs = allProcesses();
  const kafka = procs.filter(isBroker).reduce((s, p) => s + p.own, 0);
  const postmasters = procs.filter((p) => p.comm === 'postgres' && procs.find((q) => q.pid === p.ppid)?.comm !== 'postgres');
  let postgres = 0;
  for (const pm of postmasters) {
    postgres += pm.own + pm.reaped;
    for (const p of procs) if (p.ppid === pm.pid) postgres += p.own;
  }
  const child = childPid === undefined ? 0 : (readStat(childPid)?.own ?? 0);
  return { kafka, postgres, child };
}

export function cpuSince(before: CpuSnapshot, after: CpuSnapshot): CpuSnapshot {
  return { kafka: after.kafka - before.kafka, postgres: after.postgres - before.postgres, child: after.child - before.child };
}
