// Runs a TypeScript entry point from its esbuild bundle (infra/build/build.ts) rather than through tsx:
//   tsx infra/build/run-bundled.ts bench/worker/run.ts [args...]
// bench:worker runs its same-SQL ceiling in its own process, so that process runs from a bundle
// as the worker it is compared with does. Arguments, environment and stdio pass through; the exit
// code (or signal) is the bundle's.
import { spawn } from 'node:child_process';
import { buildBundles } from './build.ts';

const [entry, ...args] = process.argv.slice(2);
if (entry === undefined) {
  console.error('usage: tsx infra/build/run-bundled.ts <entry.ts> [args...]');
  process.exit(2);
}
const [bundle] = (await buildBundles([entry])) as [string];
const child = spawn(process.execPath, [bundle, ...args], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
child.once('exit', (code, signal) => {
  if (signal === null) process.exit(code ?? 1);
  // Die of the same signal: without our handlers, the default action ends this process.
  process.removeAllListeners(signal);
  process.kill(process.pid, signal);
});
