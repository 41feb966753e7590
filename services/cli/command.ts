import type { OptionSpec, ParsedArgs } from './args.ts';
import type { CliContext } from './context.ts';

export interface CommandSpec {
  /** Words after `bridge`, e.g. ['offsets', 'reset']. */
  path: string[];
  summary: string;
  /** Arguments after the command words, e.g. `--group G --topic T --to <...>`. */
  usage: string;
  details?: string;
  examples: string[];
  options: Record<string, OptionSpec>;
  positionals?: boolean;
  /** Changes something: gets --dry-run, which must change nothing. */
  mutating: boolean;
  /** Returns the exit code (0 when omitted). */
  run(args: ParsedArgs, ctx: CliContext): Promise<number | void>;
}
