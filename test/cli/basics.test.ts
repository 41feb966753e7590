import { describe, expect, it } from 'vitest';
import { testBrokers, testKafka, useTestAdmin } from '../kit/kafka.ts';
import { useTestDatabase } from '../kit/db.ts';
import { uniqueName } from '../kit/names.ts';
import { listMigrations } from '#domain/store/migrate.ts';
import { topicNames } from '#plumbing/kafka/topics.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';

describe('bridge: usage, help, topics create, migrate (as a subprocess)', () => {
  const kafka = testKafka();
  const admin = useTestAdmin(kafka);
  const empty = useTestDatabase({ empty: true });

  // The full table of usage errors runs in-process in services/cli/cli.test.ts; these prove the exit code of the real process.
  it.each([[['offsets', 'reset', '--topic', 't', '--to', 'earliest'], /--group is required/]])(
    'usage error %j exits 2 with a message',
    async (args, message) => {
      const run = await runBridge(args);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stdout).toBe('');
    },
  );

  it('--help exits 0 and prints the command list', async () => {
    const top = await runBridge(['--help']);
    expect(top.code).toBe(0);
    for (const cmd of ['topics create', 'migrate', 'offsets reset', 'lag', 'reprocess', 'trace', 'dlq replay', 'send'])
      expect(top.stdout).toContain(cmd);
  });

  it('topics create --dry-run creates nothing; without it creates the set; again reports it exists', async () => {
    const base = uniqueName('cli');
    const env = bridgeEnv({ brokers: testBrokers(), events: `${base}.events`, applied: `${base}.applied`, partitions: 2 });
    const names = topicNames({ events: `${base}.events`, applied: `${base}.applied`, retryLevels: 4 });
    const all = [names.events, ...names.retries, names.dlq, names.applied];

    const dry = await runBridge(['topics', 'create', '--dry-run', '--json'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.json().topics.map((t: any) => [t.topic, t.action])).toEqual(all.map((t) => [t, 'create']));
    expect((await admin.listTopics()).filter((t) => t.startsWith(base))).toEqual([]);

    const created = await runBridge(['topics', 'create', '--json'], env);
    expect(created.code, created.stderr).toBe(0);
    expect(created.json().created.sort()).toEqual([...all].sort());
    const meta = await admin.fetchTopicMetadata({ topics: [names.events] });
    expect(meta.topics[0]!.partitions).toHaveLength(2);

    const again = await runBridge(['topics', 'create', '--dry-run'], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`${names.dlq.replace(/\./g, '\\.')}\\s+2\\s+1\\s+exists`));
  });

  it('migrate --dry-run lists pending and touches nothing; migrate applies them; then up to date', async () => {
    const env = { DATABASE_URL: empty.url };
    const expected = (await listMigrations()).map((m) => m.name);

    const dry = await runBridge(['migrate', '--dry-run', '--json'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.json().pending.map((m: any) => m.name)).toEqual(expected);
    const { rows } = await empty.pool.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'");
    expect(rows[0].n).toBe(0);

    const applied = await runBridge(['migrate'], env);
    expect(applied.code, applied.stderr).toBe(0);
    const again = await runBridge(['migrate', '--dry-run', '--json'], env);
    expect(again.json()).toMatchObject({ pending: [], already_applied: expected.length });
  });
});
