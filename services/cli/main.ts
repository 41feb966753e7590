#!/usr/bin/env -S node --disable-warning=TimeoutNegativeWarning
// `bridge`: the operator CLI. Parses argv, runs one command, exits 0 done / 1 failed / 2 usage error.
import { runCli } from './cli.ts';
import { allCommands } from './commands/index.ts';
import { applyDevDefaults, runViaNpmScript } from '#plumbing/config/dev-defaults.ts';

if (runViaNpmScript(process.env, 'bridge')) applyDevDefaults(process.env);

const code = await runCli(process.argv.slice(2), {
  env: process.env,
  commands: allCommands,
  io: { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t) },
});
// Exit explicitly: a half-closed kafkajs client must not keep an operator's shell waiting.
process.stdout.write('', () => process.exit(code));
