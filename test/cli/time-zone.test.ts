import { beforeAll, describe, expect, it } from 'vitest';
import { createTestTopics, testBrokers, testKafka } from '../kit/kafka.ts';
import { uniqueName } from '../kit/names.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';

// An operator's laptop seven hours east of UTC (no daylight saving, so the test means the same all year).
const TZ = 'Asia/Jakarta';

describe('CLI times in a non-UTC zone (as a subprocess with TZ set)', () => {
  const kafka = testKafka();
  let env: Record<string, string>;
  let events: string;

  beforeAll(async () => {
    const { settings, names } = await createTestTopics(kafka);
    events = names.events;
    env = { ...bridgeEnv({ brokers: testBrokers(), events: settings.events, applied: settings.applied, partitions: 3 }), TZ };
  });

  it('the subprocess really runs in that zone', async () => {
    const { spawnSync } = await import('node:child_process');
    const out = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(new Date(Date.UTC(2026, 0, 31, 12)).getHours()))'], {
      env: { ...process.env, TZ },
    });
    expect(out.stdout.toString()).toBe('19');
  });

  it.each([
    ['offsets reset --to', (t: string) => ['offsets', 'reset', '--group', uniqueName('g'), '--topic', events, '--to', t, '--json']],
    ['reprocess --from', (t: string) => ['reprocess', '--topic', events, '--from', t, '--dry-run', '--json']],
    ['reprocess --to', (t: string) => ['reprocess', '--topic', events, '--from', '0', '--to', t, '--dry-run', '--json']],
    ['dlq list --since', (t: string) => ['dlq', 'list', '--since', t, '--json']],
    ['dlq replay --since', (t: string) => ['dlq', 'replay', '--all', '--since', t, '--dry-run', '--json']],
  ])('%s refuses a time without an offset (exit 2, names the fix) instead of reading it as local time', async (_name, argv) => {
    const run = await runBridge(argv('2026-01-31T12:00'), env);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(2);
    expect(run.stdout).toBe('');
    const { error } = JSON.parse(run.stderr) as { error: string };
    expect(error).toMatch(
      /2026-01-31T12:00 has no UTC offset: add Z for UTC \(2026-01-31T12:00Z\) or the zone's offset \(e\.g\. 2026-01-31T12:00\+07:00\)/,
    );
  });

  it('a time with an offset is the same instant whatever the machine zone', async () => {
    const utc = await runBridge(
      ['offsets', 'reset', '--group', uniqueName('g'), '--topic', events, '--to', '2026-01-31T12:00Z', '--json'],
      env,
    );
    expect(utc.code, utc.stderr).toBe(0);
    expect(utc.json().target).toBe('2026-01-31T12:00:00.000Z');
    const local = await runBridge(
      ['offsets', 'reset', '--group', uniqueName('g'), '--topic', events, '--to', '2026-01-31T19:00+07:00', '--json'],
      env,
    );
    expect(local.code, local.stderr).toBe(0);
    expect(local.json().target).toBe('2026-01-31T12:00:00.000Z');
  });

  it('--help says times need an offset', async () => {
    for (const command of [['offsets', 'reset'], ['reprocess'], ['dlq', 'list'], ['dlq', 'replay']]) {
      const help = await runBridge([...command, '--help'], env);
      expect(help.code).toBe(0);
      expect(help.stdout, command.join(' ')).toMatch(/with an explicit offset \(Z or ±HH:MM\)/);
    }
  });
});
