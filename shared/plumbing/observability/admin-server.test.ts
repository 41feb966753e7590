import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '#plumbing/logging/logger.ts';
import { adminHostEnv, startAdminServer, type AdminServer } from './admin-server.ts';

/** This machine's first non-loopback IPv4 address: where a neighbour would connect from. */
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

function capturingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ name: 'admin-test', level: 'info' }, stream), lines };
}

describe('startAdminServer', () => {
  let server: AdminServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('listens on loopback unless told otherwise', async () => {
    server = await startAdminServer({ port: 0, registry: new Registry(), ready: async () => ({ ready: true, checks: {} }) });
    expect(await reachable('127.0.0.1', server.port)).toBe(true);
    expect(await reachable(externalAddress(), server.port)).toBe(false);
  });

  it('listens where ADMIN_HOST says (a container sets 0.0.0.0 so the orchestrator probes reach it)', async () => {
    expect(adminHostEnv.parse({})).toEqual({ ADMIN_HOST: '127.0.0.1' });
    const { ADMIN_HOST } = adminHostEnv.parse({ ADMIN_HOST: '0.0.0.0' });
    server = await startAdminServer({
      port: 0,
      host: ADMIN_HOST,
      registry: new Registry(),
      ready: async () => ({ ready: true, checks: {} }),
    });
    expect(await reachable(externalAddress(), server.port)).toBe(true);
  });

  it('/readyz answers check names and booleans only; the failure text goes to the log', async () => {
    const { logger, lines } = capturingLogger();
    const secretish = 'password authentication failed for user "bridge" at db-primary.internal:5432';
    server = await startAdminServer({
      port: 0,
      registry: new Registry(),
      logger,
      ready: async () => ({ ready: false, checks: { database: secretish, consumer_group: true, broker: false } }),
    });
    const res = await fetch(`http://127.0.0.1:${server.port}/readyz`);
    const text = await res.text();
    expect(res.status).toBe(503);
    expect(JSON.parse(text)).toEqual({ ready: false, checks: { database: false, consumer_group: true, broker: false } });
    expect(text).not.toContain('password');
    expect(text).not.toContain('db-primary');
    expect(lines).toContainEqual(expect.objectContaining({ check: 'database', reason: secretish, msg: 'readiness check failing' }));

    // The same reason again is not logged again on every probe.
    await (await fetch(`http://127.0.0.1:${server.port}/readyz`)).text();
    expect(lines.filter((l) => l.check === 'database')).toHaveLength(1);
  });

  it('a readiness function that throws answers 503 without its message', async () => {
    const { logger, lines } = capturingLogger();
    server = await startAdminServer({
      port: 0,
      registry: new Registry(),
      logger,
      ready: async () => {
        throw new Error('connect ECONNREFUSED 10.1.2.3:5432');
      },
    });
    const res = await fetch(`http://127.0.0.1:${server.port}/readyz`);
    const text = await res.text();
    expect(res.status).toBe(503);
    expect(text).not.toContain('10.1.2.3');
    expect(JSON.parse(text)).toEqual({ ready: false, checks: {} });
    expect(lines.some((l) => JSON.stringify(l).includes('10.1.2.3'))).toBe(true);
  });

  it('/livez is /healthz (the name Kubernetes itself uses): 200 unless the process must be restarted, whatever its checks', async () => {
    let healthy = true;
    server = await startAdminServer({
      port: 0,
      registry: new Registry(),
      logger: capturingLogger().logger,
      healthy: () => healthy,
      ready: async () => ({ ready: false, checks: { broker: false, database: false } }),
    });
    for (const path of ['/healthz', '/livez', '/livez?verbose', '/healthz/']) {
      const res = await fetch(`http://127.0.0.1:${server.port}${path}`);
      expect([path, res.status, await res.json()]).toEqual([path, 200, { ok: true }]);
    }
    const ready = await fetch(`http://127.0.0.1:${server.port}/readyz?verbose`);
    expect(ready.status).toBe(503);
    await ready.text();
    healthy = false;
    const res = await fetch(`http://127.0.0.1:${server.port}/livez`);
    expect([res.status, await res.json()]).toEqual([503, { ok: false }]);
  });

  it('closes at once while a kept-alive client (a Prometheus scraper) is in the middle of a request', async () => {
    // Node's server.close() waits for a connection busy at that moment until its keep-alive
    // timeout (5 s) unless the answer closes it: every shutdown would wait for that.
    let release: () => void = () => {};
    const slow = new Promise<void>((resolve) => (release = resolve));
    let entered: () => void = () => {};
    const inReadyCheck = new Promise<void>((resolve) => (entered = resolve));
    const started = await startAdminServer({
      port: 0,
      registry: new Registry(),
      logger: capturingLogger().logger,
      ready: async () => {
        entered();
        await slow;
        return { ready: false, checks: { accepting: false } };
      },
    });
    const agent = new http.Agent({ keepAlive: true });
    const answer = new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: started.port, path: '/readyz', agent }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
        })
        .on('error', reject);
    });
    // The request is being answered (its readiness check waits) when the server is told to close.
    await inReadyCheck;
    const t0 = performance.now();
    const closed = started.close().then(() => performance.now() - t0);
    release();
    expect(await answer).toEqual({ status: 503, connection: 'close' });
    // Liveness bound: half the keep-alive timeout it would otherwise wait for, far above the figure.
    expect(await closed).toBeLessThan(2_500);
    agent.destroy();
  });
});
