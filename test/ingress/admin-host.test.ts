import { readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../kit/infra.ts';
import { testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { useTestDatabase } from '../kit/db.ts';
import { uniqueName } from '../kit/names.ts';
import { spawnService, type ServiceProcess } from '../kit/service.ts';
import { sleep } from '../kit/eventually.ts';

const devEnv = parseEnv(readFileSync(path.join(repoRoot, 'infra', 'dev', 'dev.env'), 'utf8')) as Record<string, string>;

/** This machine's first non-loopback IPv4 address: where a neighbour on the network connects to. */
function externalAddress(): string {
  const found = Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal);
  if (!found) throw new Error('this test needs a non-loopback IPv4 interface');
  return found.address;
}

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 2000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

describe('ADMIN_HOST: where the admin port listens (services as processes)', () => {
  const kafka = testKafka();
  const { names } = useTestTopics(kafka, { eventsPartitions: 1 });
  const db = useTestDatabase();
  const running: ServiceProcess[] = [];
  afterAll(async () => {
    for (const s of running) await s.stop();
  });

  const ingressEnv = (extra: Record<string, string>) => ({
    ...devEnv,
    KAFKA_BROKERS: testBrokers().join(','),
    TOPIC_EVENTS: names.events,
    PORT: '0',
    ADMIN_PORT: '0',
    HOST: '127.0.0.1',
    ...extra,
  });
  const workerEnv = (extra: Record<string, string>) => ({
    KAFKA_BROKERS: testBrokers().join(','),
    DATABASE_URL: db.url,
    TOPIC_EVENTS: names.events,
    TOPIC_APPLIED: names.applied,
    CONSUMER_GROUP: uniqueName('theme-applier'),
    ADMIN_PORT: '0',
    ...extra,
  });

  it.each([
    ['ingress', ingressEnv],
    ['worker', workerEnv],
  ] as const)('%s: loopback by default, every interface with ADMIN_HOST=0.0.0.0', async (kind, env) => {
    const local = spawnService(kind, env({}));
    running.push(local);
    const localPort = await local.adminPort();
    expect(await reachable('127.0.0.1', localPort)).toBe(true);
    expect(await reachable(externalAddress(), localPort)).toBe(false);
    await local.stop();

    const everywhere = spawnService(kind, env({ ADMIN_HOST: '0.0.0.0' }));
    running.push(everywhere);
    const port = await everywhere.adminPort();
    expect(await reachable(externalAddress(), port)).toBe(true);
    const metrics = await fetch(`http://${externalAddress()}:${port}/metrics`);
    expect(metrics.status).toBe(200);
    await metrics.text();
    await everywhere.stop();
  });

  it('ingress /readyz names its checks with booleans; why the broker check fails is in the log only', async () => {
    // A topic that does not exist: the broker check fails with the broker's own words.
    const missing = uniqueName('no-such-topic');
    const ingress = spawnService('ingress', ingressEnv({ TOPIC_EVENTS: missing }));
    running.push(ingress);
    const port = await ingress.adminPort();
    let answer: { status: number; body: string } | undefined;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      answer = { status: res.status, body: await res.text() };
      if (ingress.stdout().includes('"readiness check failing"')) break;
      await sleep(200);
    }
    expect(answer!.status).toBe(503);
    expect(JSON.parse(answer!.body)).toEqual({ ready: false, checks: { broker: false, accepting: true } });
    expect(answer!.body).not.toContain(missing);
    const logged = ingress
      .stdout()
      .split('\n')
      .filter((l) => l.includes('"readiness check failing"'))
      .map((l) => JSON.parse(l) as { check: string; reason: string });
    expect(logged).toContainEqual(expect.objectContaining({ check: 'broker' }));
    expect(logged.find((l) => l.check === 'broker')!.reason.length).toBeGreaterThan(0);
    await ingress.stop();
  });
});
