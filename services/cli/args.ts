import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';

/** Wrong invocation: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The command ran and failed in an expected way (refusal, failed outcome): message only, exit code 1. */
export class CommandFailed extends Error {
  readonly details: unknown;
  constructor(message: string, details?: unknown) {
    super(message);
    this.name = 'CommandFailed';
    this.details = details;
  }
}

export type OptionSpec = ParseArgsOptionsConfig[string] & { description: string; valueName?: string };

export interface ParsedArgs {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

export const globalOptions: Record<string, OptionSpec> = {
  json: { type: 'boolean', description: 'print one JSON document on stdout (for scripts)' },
  help: { type: 'boolean', short: 'h', description: 'show this help' },
};

export const dryRunOption: Record<string, OptionSpec> = {
  'dry-run': { type: 'boolean', description: 'show what would change and change nothing' },
};

export function parseCommandArgs(args: string[], options: Record<string, OptionSpec>, allowPositionals: boolean): ParsedArgs {
  const config: ParseArgsOptionsConfig = {};
  for (const [name, spec] of Object.entries(options)) {
    const { description: _d, valueName: _v, ...rest } = spec;
    config[name] = rest;
  }
  try {
    const { values, positionals } = parseArgs({ args, options: config, allowPositionals, strict: true });
    return { values: values as ParsedArgs['values'], positionals };
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export function stringOption(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new UsageError(`--${name} takes a value`);
  if (v.length === 0) throw new UsageError(`--${name} must not be empty`);
  return v;
}

export function requiredOption(args: ParsedArgs, name: string): string {
  const v = stringOption(args, name);
  if (v === undefined) throw new UsageError(`--${name} is required`);
  return v;
}

export function flag(args: ParsedArgs, name: string): boolean {
  return args.values[name] === true;
}

export function intOption(args: ParsedArgs, name: string, min = 0): number | undefined {
  const v = stringOption(args, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < min) throw new UsageError(`--${name} must be an integer >= ${min}, got "${v}"`);
  return Number(v);
}

/** An ISO-8601 time with at least a date; bare integers are offsets, never times. */
export function parseIsoTime(value: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}/.test(value)) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

export type Position = { kind: 'offset'; offset: bigint } | { kind: 'time'; timestamp: number };

/** `--from` / `--to` of reprocess: an offset or an ISO time. */
export function parsePosition(value: string, optionName: string): Position {
  if (/^\d+$/.test(value)) return { kind: 'offset', offset: BigInt(value) };
  const timestamp = parseIsoTime(value);
  if (timestamp !== undefined) return { kind: 'time', timestamp };
  throw new UsageError(`--${optionName} must be an offset (integer) or an ISO time (e.g. 2026-01-31T12:00:00Z), got "${value}"`);
}

export function renderOptions(options: Record<string, OptionSpec>): string {
  const rows = Object.entries(options).map(([name, spec]) => {
    const short = spec.short ? `-${spec.short}, ` : '    ';
    const value = spec.type === 'string' ? ` <${spec.valueName ?? name}>` : '';
    return [`  ${short}--${name}${value}`, spec.description] as const;
  });
  const width = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([left, right]) => `${left.padEnd(width)}  ${right}`).join('\n');
}
