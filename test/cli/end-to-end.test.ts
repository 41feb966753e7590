import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { repoRoot } from '../kit/infra.ts';
import { loadSources } from '#domain/sources/index.ts';
import { startIngress, type IngressHandle } from '#services/ingress/ingress.ts';
import { testBrokers } from '../kit/kafka.ts';
import { useWorker } from '../kit/worker.ts';
import { bridgeEnv, runBridge } from '../kit/run-bridge.ts';
import { eventually } from '../kit/eventually.ts';

/** The operator's first minute: send a demo webhook through the real ingress and worker, then look at it. */
describe('bridge send / trace / lag against the real ingress and worker', () => {
  const { db, settings, groupId } = useWorker({ deps: { adminServer: false } });
  let ingress: IngressHandle;
  let env: Record<string, string>;

  beforeAll(async () => {
    const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;
    const sourcesFile = path.join(repoRoot, devEnv.WEBHOOK_SOURCES_FILE!);
    env = {
      ...bridgeEnv({
        brokers: testBrokers(),
        databaseUrl: db.url,
        events: settings.events,
        applied: settings.applied,
        partitions: 3,
        group: groupId,
      }),
      WEBHOOK_SOURCES_FILE: sourcesFile,
      DEMO_SECRET: devEnv.DEMO_SECRET!,
      DEMO_STD_SECRET: devEnv.DEMO_STD_SECRET!,
      DEMO_BODY_SECRET: devEnv.DEMO_BODY_SECRET!,
      DEMO_STRICT_SECRET: devEnv.DEMO_STRICT_SECRET!,
      DEMO_TIME_SECRET: devEnv.DEMO_TIME_SECRET!,
    };
    ingress = await startIngress({
      port: 0,
      adminPort: 0,
      host: '127.0.0.1',
      brokers: testBrokers(),
      topic: settings.events,
      sources: loadSources(sourcesFile, env),
      logLevel: 'silent',
    });
  });
  afterAll(async () => {
    await ingress?.close();
  });

  it('send --demo is accepted (202), applied by the worker, traced, and the lag drains to 0', async () => {
    const sent = await runBridge(['send', '--demo', '--url', ingress.url, '--json'], env);
    expect(sent.code, sent.stdout + sent.stderr).toBe(0);
    const out = sent.json();
    expect(out).toMatchObject({ ok: true, status: 202, source: 'demo', response: { status: 'accepted', event_id: out.event_id } });

    const std = await runBridge(['send', '--demo', '--source', 'demo-std', '--url', ingress.url], env);
    expect(std.code, std.stdout + std.stderr).toBe(0);
    expect(std.stdout).toMatch(/202 Accepted/);

    await eventually(
      async () => {
        const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM inbox_events WHERE status IN ('applied', 'stale')`);
        return rows[0].n === 2;
      },
      { timeoutMs: 30_000, message: 'both demo events applied' },
    );
    const trace = await runBridge(['trace', 'tenant_acme', 'theme', 'thm_minimal-dark', '--json'], env);
    expect(trace.code, trace.stderr).toBe(0);
    expect(trace.json().events.map((e: any) => e.event_id)).toContain(out.event_id);
    expect(trace.json().state).toMatchObject({ deleted: false });

    await eventually(
      async () => {
        const lag = await runBridge(['lag', '--json'], env);
        return lag.code === 0 && lag.json().total_lag === 0;
      },
      { timeoutMs: 30_000, message: 'lag 0' },
    );
  });
});
