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

/** How the help of every option that takes a time says what it takes. */
export const TIME_HELP = 'an ISO-8601 time with an explicit offset (Z or ±HH:MM), e.g. 2026-01-31T12:00:00Z';

// YYYY-MM-DDTHH:MM[:SS[.fraction]] and an offset: Z, or ±HH:MM.
const INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;
// The same without the offset (or a date alone): what Date.parse would read as local time (or UTC midnight).
const WITHOUT_OFFSET = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?)?$/i;

/**
 * An instant, in ms: an ISO-8601 date and time with an explicit offset. Undefined when the value is
 * not such a time (the caller says what it expected). A time without an offset is a UsageError
 * naming the fix: Date.parse would read it in the zone of whichever machine runs the CLI, and an
 * operator on a laptop in another zone would select other hours than meant without noticing.
 */
export function parseIsoTime(value: string, optionName: string): number | undefined {
  const bare = WITHOUT_OFFSET.exec(value);
  if (bare) {
    if (!validFields(bare)) return undefined;
    const example = bare[4] === undefined ? `${value}T00:00:00` : value;
    throw new UsageError(
      `--${optionName} ${value} has no UTC offset: add Z for UTC (${example}Z) or the zone's offset (e.g. ${example}+07:00); ` +
        "times are never read in this machine's zone",
    );
  }
  const m = INSTANT.exec(value);
  if (!m || !validFields(m)) return undefined;
  const offset = m[8]!.toUpperCase();
  if (offset !== 'Z' && (Number(offset.slice(1, 3)) > 23 || Number(offset.slice(4, 6)) > 59)) return undefined;
  const ms = Date.parse(value.toUpperCase());
  return Number.isNaN(ms) ? undefined : ms;
}

/** Date.parse takes 2026-02-30 as March 2 and 24:00 as the next day: refuse what no calendar has. */
function validFields(m: RegExpExecArray): boolean {
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return false;
  if (m[4] === undefined) return true;
  return Number(m[4]) <= 23 && Number(m[5]) <= 59 && (m[6] === undefined || Number(m[6]) <= 59);
}

export type Position = { kind: 'offset'; offset: bigint } | { kind: 'time'; timestamp: number };

/** `--from` / `--to` of reprocess: an offset or an ISO time with an offset. */
export function parsePosition(value: string, optionName: string): Position {
  if (/^\d+$/.test(value)) return { kind: 'offset', offset: BigInt(value) };
  const timestamp = parseIsoTime(value, optionName);
  if (timestamp !== undefined) return { kind: 'time', timestamp };
  throw new UsageError(`--${optionName} must be an offset (integer) or ${TIME_HELP}, got "${value}"`);
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
