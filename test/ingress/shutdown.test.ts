import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../kit/infra.ts';
import { testBrokers, testKafka, topicRecordCount, useTestTopics } from '../kit/kafka.ts';
import { post, signedRequest, startTestIngress } from '../kit/ingress.ts';
import { spawnService } from '../kit/service.ts';
import { sleep } from '../kit/eventually.ts';

const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8'));

describe('ingress shutdown and start-up', () => {
  const kafka = testKafka();
  const topic = useTestTopics(kafka, { eventsPartitions: 3, retryLevels: 0 }).names.events;

  it('answers in-flight requests on close and acknowledges only what is on the topic', async () => {
    const ingress = await startTestIngress(testBrokers(), topic);
    const before = await topicRecordCount(kafka, topic);
    let settled = 0;
    const pending = Array.from({ length: 100 }, () =>
      post(ingress.url, signedRequest())
        .catch(() => ({ status: 0 }))
        .finally(() => (settled += 1)),
    );
    // Close while requests are being handled (or, on a very slow machine, once they are done).
    while (ingress.activeRequests() < 10 && settled < 100) await new Promise((r) => setImmediate(r));
    await ingress.close();
    const statuses = (await Promise.all(pending)).map((a) => a.status);
    const ok = statuses.filter((s) => s === 202).length;
    expect(statuses.every((s) => s === 202 || s === 503 || s === 0)).toBe(true);
    expect(ok).toBeGreaterThan(0);
    expect(await topicRecordCount(kafka, topic)).toBe(before + ok);
    await expect(post(ingress.url, signedRequest())).rejects.toThrow();
  });

  it('runs as a process with the dev sources, and exits 0 on SIGTERM', async () => {
    const run = spawnService('ingress', {
      ...devEnv,
      KAFKA_BROKERS: testBrokers().join(','),
      TOPIC_EVENTS: topic,
      PORT: '0',
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
    } as Record<string, string>);
    const deadline = Date.now() + 30_000;
    let port: number | undefined;
    while (port === undefined && Date.now() < deadline && run.child.exitCode === null) {
      const line = run
        .stdout()
        .split('\n')
        .find((l) => l.includes('"ingress listening"'));
      if (line) port = (JSON.parse(line) as { port: number }).port;
      else await sleep(50);
    }
    expect(port, run.stderr()).toBeDefined();
    const answer = await post(`http://127.0.0.1:${port}`, signedRequest({ source: 'demo', secret: devEnv.DEMO_SECRET! }));
    expect(answer.status).toBe(202);
    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(0);
    const lines = run
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('{'));
    expect(lines.some((l) => l.includes('"ingress stopped"'))).toBe(true);
    const request = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.status === 202)!;
    expect(request).toMatchObject({ source: 'demo', tenant: 'tenant_acme', reason: 'accepted' });
    expect(request.body_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(typeof request.latency_ms).toBe('number');
    // Never a secret or a signature in the logs.
    expect(run.stdout()).not.toContain(devEnv.DEMO_SECRET!);
    expect(run.stdout()).not.toMatch(/v1=[0-9a-f]{64}/);
  });

  it('refuses to start when two sources share a secret, and the dev sources do not', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'bridge-sources-')), 'sources.json');
    writeFileSync(
      file,
      JSON.stringify({
        sources: [
          { id: 'shop', secrets: [{ id: 'shop-1', env: 'SHOP_SECRET' }], tenants: ['tenant_acme'] },
          { id: 'shop-eu', secrets: [{ id: 'shop-eu-1', env: 'SHOP_EU_SECRET' }], tenants: ['tenant_other'] },
        ],
      }),
    );
    const run = spawnService('ingress', {
      KAFKA_BROKERS: testBrokers().join(','),
      TOPIC_EVENTS: topic,
      PORT: '0',
      ADMIN_PORT: '0',
      WEBHOOK_SOURCES_FILE: file,
      SHOP_SECRET: 'one-secret-for-two-sources-0123456789',
      SHOP_EU_SECRET: 'one-secret-for-two-sources-0123456789',
    });
    const code = await Promise.race([
      run.exited.then((e) => e.code),
      new Promise<string>((r) => setTimeout(() => r('still running'), 15_000)),
    ]);
    if (code === 'still running') run.child.kill('SIGKILL');
    expect(code).toBe(1);
    expect(run.stderr()).toContain(
      'source "shop-eu" secret "shop-eu-1" has the same value as source "shop" secret "shop-1": a request signed for one would verify for the other',
    );
    expect(run.stderr()).not.toContain('one-secret-for-two-sources');
    // demo and demo-strict once shared DEMO_SECRET: a request signed for one verified for the other.
    expect(devEnv.DEMO_STRICT_SECRET).toBeTruthy();
    const devSecrets = [
      devEnv.DEMO_SECRET,
      devEnv.DEMO_STD_SECRET,
      devEnv.DEMO_BODY_SECRET,
      devEnv.DEMO_STRICT_SECRET,
      devEnv.DEMO_TIME_SECRET,
    ];
    expect(new Set(devSecrets).size).toBe(5);
  });

  it('refuses to start when a secret the sources file names is missing', async () => {
    const env: Record<string, string> = {
      ...(devEnv as Record<string, string>),
      KAFKA_BROKERS: testBrokers().join(','),
      PORT: '0',
      ADMIN_PORT: '0',
    };
    delete env.DEMO_STD_SECRET;
    const run = spawnService('ingress', env);
    expect((await run.exited).code).toBe(1);
    expect(run.stderr()).toContain('DEMO_STD_SECRET is not set');
  });
});
