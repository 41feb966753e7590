import { describe, expect, it } from 'vitest';
import { runCli } from './cli.ts';
import { allCommands } from './commands/index.ts';

async function run(argv: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { env, commands: allCommands, io: { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) } });
  return { code, stdout, stderr };
}

describe('runCli dispatch and usage errors (exit 2)', () => {
  it.each([
    [['frobnicate'], /unknown command "frobnicate"/],
    [[], /Usage: bridge <command>/],
    [['dlq'], /missing or unknown subcommand of "dlq"/],
    [['offsets', 'reset', '--group', 'g', '--topic', 't'], /--to is required/],
    [['offsets', 'reset', '--group', 'g', '--topic', 't', '--to', '2026-13-45'], /--to must be earliest, latest/],
    [['offsets', 'reset', '--group', 'g', '--topic', 't', '--to', '1', '--partition', 'x'], /--partition must be an integer/],
    [['lag', '--group'], /argument missing/],
    [['send', '--file', 'e.json'], /--source is required with --file/],
    [['send', '--demo', '--url', 'not a url'], /--url must be an absolute/],
    [['reprocess', '--topic', 't'], /--from is required/],
    [['reprocess', '--topic', 't', '--from', 'soon'], /--from must be an offset/],
    [['reprocess', '--topic', 't', '--from', '10', '--to', '5'], /--to must not be before --from/],
    [['trace', 'tenant'], /expects <tenant> <resource_type> <resource_id>/],
    [['dlq', 'show'], /expects one <event_id\|partition:offset>/],
    [['dlq', 'replay'], /give event ids \(or partition:offset\) to replay, or --all/],
    [['dlq', 'replay', 'e1', '--all'], /either event ids or --all/],
    [['dlq', 'list', '--since', 'last week'], /--since must be an ISO time/],
  ])('%j', async (argv, message) => {
    const r = await run(argv);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });

  it('usage errors are JSON on stderr with --json', async () => {
    const r = await run(['lag', '--nope', '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stderr).error).toMatch(/Unknown option '--nope'/);
  });

  it('every command has --help (exit 0), examples, and --dry-run when it changes something', async () => {
    for (const command of allCommands) {
      const r = await run([...command.path, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`bridge ${command.path.join(' ')}`);
      expect(r.stdout).toContain('Examples:');
      expect(r.stdout.includes('--dry-run')).toBe(command.mutating);
    }
    const top = await run(['--help']);
    expect(top.code).toBe(0);
    for (const command of allCommands) expect(top.stdout).toContain(command.path.join(' '));
    expect((await run(['dlq', '--help'])).stdout).toContain('dlq replay');
  });

  it('a missing setting is a failure (exit 1) naming the variable, not a usage error', async () => {
    const r = await run(['lag']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/KAFKA_BROKERS/);
  });
});
