import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { pino } from 'pino';
import { isoTimeCached } from './logger.ts';

describe('isoTimeCached', () => {
  it('is pino.stdTimeFunctions.isoTime: same fragment format, the current millisecond', () => {
    for (let i = 0; i < 50; i += 1) {
      const before = pino.stdTimeFunctions.isoTime();
      const cached = isoTimeCached();
      const after = pino.stdTimeFunctions.isoTime();
      expect(cached).toMatch(/^,"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$/);
      // ISO-8601 strings of one format order like the times they show.
      expect(cached >= before && cached <= after).toBe(true);
    }
  });
});

describe('stdoutDestination', () => {
  // A child process, since the destination is the process's own stdout (fd 1). With `stopOn`, the
  // child is killed as soon as stdout shows that text, and `whileRunning` says whether it did so
  // before the child announced on stderr (synchronous on a pipe) that it was about to end.
  function runChild(code: string, stopOn?: string): Promise<{ stdout: string; whileRunning: boolean; exitCode: number | null }> {
    const script = `import { createLogger, stdoutDestination } from '#plumbing/logging/logger.ts';
      const logger = createLogger({ name: 'child', level: 'info' }, stdoutDestination());
      ${code}`;
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: process.cwd() });
      let stdout = '';
      let whileRunning = false;
      let ending = false;
      child.stderr.on('data', (chunk: Buffer) => (ending ||= chunk.toString().includes('ending')));
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stopOn !== undefined && !whileRunning && !ending && stdout.includes(stopOn)) {
          whileRunning = true;
          child.kill();
        }
      });
      child.on('error', reject);
      child.on('close', (exitCode) => resolve({ stdout, whileRunning, exitCode }));
    });
  }

  it('writes a held line while the process runs on, not only at exit', async () => {
    // The child would live on for 20 s after the line: without the periodic flush, a line shorter
    // than the buffer would only appear when it exits. The parent kills it on seeing the line.
    const { stdout, whileRunning } = await runChild(
      `logger.info({ n: 1 }, 'one line');
      setTimeout(() => process.stderr.write('ending\\n'), 20_000);`,
      '"msg":"one line"',
    );
    expect(stdout).toContain('"msg":"one line"');
    expect(whileRunning).toBe(true);
  }, 60_000);

  it('writes multi-byte text intact, across several buffer fills', async () => {
    // The held lines are counted in bytes, not characters: a miscount would cut or join them.
    const { stdout, exitCode } = await runChild(`
      for (let n = 1; n <= 200; n += 1) logger.info({ n, text: 'é€😀'.repeat(n % 7) }, 'multi-byte');
      setTimeout(() => process.exit(0), 300);`);
    expect(exitCode).toBe(0);
    const lines = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { n: number; text: string });
    expect(lines.map((l) => l.n)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    for (const l of lines) expect(l.text).toBe('é€😀'.repeat(l.n % 7));
  }, 20_000);

  it('writes every held line when the process exits at once', async () => {
    const { stdout, exitCode } = await runChild(`
      for (let n = 1; n <= 3; n += 1) logger.info({ n }, 'line before exit');
      process.exit(0);`);
    expect(exitCode).toBe(0);
    expect(
      stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).n),
    ).toEqual([1, 2, 3]);
  }, 20_000);
});
