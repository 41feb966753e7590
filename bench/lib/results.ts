// The machine-readable side of every benchmark: bench/results/<name>.json beside the .md the bench
// writes for people. docs/benchmarks.md is rendered from these files (bench/lib/render-docs.ts), so
// a figure is written once, by the run that measured it, and every doc quotes it from there.
import { readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../infra/paths.ts';

// From the repository root, not this module's directory: bench:worker runs from a bundle under .cache/.
export const RESULTS_DIR = path.join(repoRoot, 'bench', 'results');

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGiB?: number;
  /** One-minute load average before and after the run: other work on the machine shows here. */
  loadAverage?: { before: number; after: number };
}

export interface Versions {
  node: string;
  kafka?: string;
  postgres?: string;
  kafkajs?: string;
  /** @platformatic/kafka, where a bench runs it beside kafkajs. */
  platformaticKafka?: string;
}

/** A headline figure over the rounds; the docs show it as the range of `values`. */
export interface Figure {
  label: string;
  unit: string;
  values: number[];
  /** The target it is held to, as written in the issue that set it ("≥ 0.5"). */
  target?: string;
}

/**
 * One complete earlier (or the latest) run of a bench whose file keeps several, so that a figure
 * can be shown with its spread over runs and hours rather than as the latest run's alone.
 */
export interface BenchRun {
  ranAt: string;
  loadAverage?: { before: number; after: number };
  calibrationMs?: { before: number; after: number };
  /** Other test or benchmark runs seen on the machine during the run. */
  otherRuns?: string[];
  settings?: Record<string, unknown>;
  /** This run's headline figures, by label. */
  figures: Record<string, number>;
}

export interface BenchResult {
  /** The file's name without .json, and the key of its entry in the docs. */
  name: string;
  command: string;
  /** ISO time the run started. */
  ranAt: string;
  machine: Machine;
  /** bench/lib/machine.ts cpuCalibrationMs() before and after the run, when the bench takes it. */
  calibrationMs?: { before: number; after: number };
  versions: Versions;
  settings: Record<string, unknown>;
  /** Every round as measured, one object per round. */
  rounds: Array<Record<string, unknown>>;
  /** The headline figures, each with its value in every round (or every run) behind it. */
  summary: Figure[];
  /** The recent runs, the latest last, for a bench that keeps several (bench:e2e). */
  runs?: BenchRun[];
}

/** This machine's CPUs and memory; pass the load average taken before the run to record both. */
export function machineNow(loadBefore?: number): Machine {
  const machine: Machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown CPU',
    memoryGiB: Number((totalmem() / 2 ** 30).toFixed(1)),
  };
  if (loadBefore !== undefined) machine.loadAverage = { before: round2(loadBefore), after: round2(loadavg()[0]!) };
  return machine;
}

/** Node's version and the installed kafkajs's, plus what the bench learned from its servers. */
export function versionsNow(servers: { kafka?: string; postgres?: string } = {}): Versions {
  return { node: process.version, ...servers, kafkajs: installedVersion('kafkajs') };
}

function installedVersion(pkg: string): string | undefined {
  try {
    const file = path.resolve(import.meta.dirname, '..', '..', 'node_modules', pkg, 'package.json');
    return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return undefined;
  }
}

const round2 = (n: number) => Math.round(n * 100) / 100;

/** The JSON text of a result: two-space indent and a final newline, so a rerun diffs line by line. */
export function resultText(result: BenchResult): string {
  return `${JSON.stringify(result, null, 2)}\n`;
}

/** Writes `<dir>/<name>.json` and returns its path. */
export function writeBenchResult(result: BenchResult, dir = RESULTS_DIR): string {
  if (!/^[\w.-]+$/.test(result.name)) throw new Error(`bench result name must be a plain file name: ${result.name}`);
  for (const figure of result.summary) {
    if (figure.values.length === 0) throw new Error(`figure "${figure.label}" has no values`);
  }
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${result.name}.json`);
  writeFileSync(file, resultText(result));
  return file;
}

/** Every result in `dir`, by name. */
export function readBenchResults(dir = RESULTS_DIR): BenchResult[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as BenchResult);
}
