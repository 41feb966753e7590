import { pino } from 'pino';
import { ConfigError } from '#plumbing/config/env.ts';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';
import { CommandFailed, dryRunOption, globalOptions, parseCommandArgs, renderOptions, UsageError, type OptionSpec } from './args.ts';
import type { CommandSpec } from './command.ts';
import { CliContext, type Env } from './context.ts';
import { Output, type CliIo } from './output.ts';

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

export interface RunCliOptions {
  io: CliIo;
  env: Env;
  commands: CommandSpec[];
  logger?: Logger;
}

function optionsOf(command: CommandSpec): Record<string, OptionSpec> {
  return { ...command.options, ...(command.mutating ? dryRunOption : {}), ...globalOptions };
}

export function commandHelp(command: CommandSpec): string {
  const lines = [`bridge ${command.path.join(' ')} ${command.usage}`.trimEnd(), '', command.summary];
  if (command.details) lines.push('', command.details);
  lines.push('', 'Options:', renderOptions(optionsOf(command)));
  if (command.examples.length > 0) lines.push('', 'Examples:', ...command.examples.map((e) => `  ${e}`));
  lines.push('', 'Exit codes: 0 done, 1 failed, 2 usage error.');
  return `${lines.join('\n')}\n`;
}

export function topHelp(commands: CommandSpec[], prefix: string[] = []): string {
  const shown = commands.filter((c) => prefix.every((w, i) => c.path[i] === w));
  const width = Math.max(...shown.map((c) => c.path.join(' ').length));
  return [
    `Usage: bridge ${prefix.length ? `${prefix.join(' ')} ` : ''}<command> [options]`,
    '',
    'Operator CLI of theme-bridge, the webhook-to-Kafka bridge.',
    '',
    'Commands:',
    ...shown.map((c) => `  ${c.path.join(' ').padEnd(width)}  ${c.summary}`),
    '',
    'Every command takes --help and --json; commands that change something take --dry-run.',
    'Config comes from the environment: KAFKA_BROKERS, DATABASE_URL, TOPIC_EVENTS, TOPIC_APPLIED,',
    'TOPIC_RETRY_LEVELS, CONSUMER_GROUP (default theme-applier), WEBHOOK_SOURCES_FILE, and for the',
    'sources kept in Postgres BRIDGE_SECRET_KEYS (BRIDGE_ACTOR names you in their audit log).',
    'Exit codes: 0 done, 1 failed, 2 usage error.',
    '',
  ].join('\n');
}

/** Longest command whose words start argv (options may not come before the command words). */
function findCommand(commands: CommandSpec[], argv: string[]): CommandSpec | undefined {
  let best: CommandSpec | undefined;
  for (const c of commands) {
    if (c.path.every((w, i) => argv[i] === w) && (!best || c.path.length > best.path.length)) best = c;
  }
  return best;
}

function errorMessage(error: unknown): string {
  if (error instanceof Error) {
    // kafkajs wraps the useful part (e.g. "Connection error: connect ECONNREFUSED") in its cause chain.
    const cause = (error as { originalError?: unknown }).originalError ?? error.cause;
    const inner = cause instanceof Error && !error.message.includes(cause.message) ? ` (${cause.message})` : '';
    return `${error.message}${inner}`;
  }
  return String(error);
}

export async function runCli(argv: string[], options: RunCliOptions): Promise<number> {
  const { io, env, commands } = options;
  const json = argv.includes('--json');
  const out = new Output(io, json);
  const command = findCommand(commands, argv);
  if (!command) {
    const words = argv.filter((a) => !a.startsWith('-'));
    const prefix = words.length > 0 && commands.some((c) => c.path[0] === words[0]) ? [words[0]!] : [];
    const wantsHelp = argv.includes('--help') || argv.includes('-h') || argv[0] === 'help';
    if (wantsHelp && (prefix.length > 0 || words.length === 0 || words[0] === 'help')) {
      io.stdout(topHelp(commands, prefix));
      return EXIT_OK;
    }
    if (words.length === 0 || prefix.length > 0) {
      io.stderr(topHelp(commands, prefix));
      if (prefix.length > 0) out.error(`missing or unknown subcommand of "${prefix[0]}"`);
      return EXIT_USAGE;
    }
    out.error(`unknown command "${words[0]}"; run bridge --help`);
    return EXIT_USAGE;
  }

  const rest = argv.slice(command.path.length);
  if (rest.includes('--help') || rest.includes('-h')) {
    io.stdout(commandHelp(command));
    return EXIT_OK;
  }

  const logger =
    options.logger ??
    // stderr: stdout carries only the command's result, so --json output stays parseable. Silent by
    // default: the command prints its own error; BRIDGE_LOG_LEVEL=debug shows what kafkajs and pg did.
    createLogger({ name: 'bridge-cli', level: env.BRIDGE_LOG_LEVEL ?? 'silent' }, pino.destination({ dest: 2, sync: true }));
  const ctx = new CliContext(env, out, logger);
  try {
    const args = parseCommandArgs(rest, optionsOf(command), command.positionals ?? false);
    const code = await command.run(args, ctx);
    return code ?? EXIT_OK;
  } catch (error) {
    if (error instanceof UsageError) {
      out.error(error.message);
      if (!json)
        io.stderr(`usage: bridge ${command.path.join(' ')} ${command.usage}\nrun "bridge ${command.path.join(' ')} --help" for details\n`);
      return EXIT_USAGE;
    }
    if (error instanceof ConfigError) {
      out.error('invalid configuration', { problems: error.problems });
      if (!json) io.stderr(`  ${error.problems.join('\n  ')}\n`);
      return EXIT_FAILED;
    }
    if (error instanceof CommandFailed) {
      out.error(error.message, error.details === undefined ? {} : { details: error.details });
      return EXIT_FAILED;
    }
    logger.debug({ err: error }, 'command failed');
    out.error(errorMessage(error));
    return EXIT_FAILED;
  } finally {
    await ctx.close();
  }
}
