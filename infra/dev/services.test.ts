import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  applyNiceness,
  claimPort,
  parseWorkerCount,
  serviceEnv,
  serviceNiceness,
  serviceSpecs,
  stopSignalFor,
  supervised,
  upAdminPorts,
} from './services.ts';

describe('npm start port scheme', () => {
  it('ingress on INGRESS_ADMIN_PORT, worker i on WORKER_ADMIN_PORT + i', () => {
    expect(upAdminPorts({}, 1)).toEqual({ ingress: 9464, workers: [9465] });
    expect(upAdminPorts({}, 3)).toEqual({ ingress: 9464, workers: [9465, 9466, 9467] });
    expect(upAdminPorts({ INGRESS_ADMIN_PORT: '7000', WORKER_ADMIN_PORT: '7100' }, 2)).toEqual({ ingress: 7000, workers: [7100, 7101] });
  });

  it('a service is asked to stop with the signal it did not get directly', () => {
    expect(stopSignalFor('SIGINT')).toBe('SIGTERM');
    expect(stopSignalFor('SIGTERM')).toBe('SIGINT');
  });

  it("a service runs with its spec's allocator settings unless the caller's environment sets them", () => {
    expect(serviceEnv(serviceSpecs.ingress, { PORT: '1' })).toEqual({ MALLOC_ARENA_MAX: '2', PORT: '1' });
    expect(serviceEnv(serviceSpecs.ingress, { MALLOC_ARENA_MAX: '8' }).MALLOC_ARENA_MAX).toBe('8');
    expect(serviceEnv(serviceSpecs.worker, { PORT: '1' })).toEqual({ PORT: '1' });
  });

  it('the worker runs at niceness 10 (WORKER_NICENESS from 0 to 19 changes it), the ingress and the console at 0', () => {
    expect(serviceNiceness(serviceSpecs.worker, {})).toBe(10);
    expect(serviceNiceness(serviceSpecs.worker, { WORKER_NICENESS: '0' })).toBe(0);
    expect(serviceNiceness(serviceSpecs.worker, { WORKER_NICENESS: '19' })).toBe(19);
    expect(serviceNiceness(serviceSpecs.ingress, { WORKER_NICENESS: '5' })).toBe(0);
    expect(serviceNiceness(serviceSpecs.console, {})).toBe(0);
    for (const bad of ['-1', '20', '2.5', 'low'])
      expect(() => serviceNiceness(serviceSpecs.worker, { WORKER_NICENESS: bad })).toThrow(/WORKER_NICENESS/);
  });

  it('a started process gets its niceness from the kernel', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30_000)'], { stdio: 'ignore' });
    try {
      applyNiceness(serviceSpecs.worker, child, { WORKER_NICENESS: '7' });
      expect(os.getPriority(child.pid)).toBe(7);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('WORKERS is a positive integer, 1 when unset', () => {
    expect(parseWorkerCount(undefined)).toBe(1);
    expect(parseWorkerCount('')).toBe(1);
    expect(parseWorkerCount('4')).toBe(4);
    for (const bad of ['0', '-1', '1.5', 'two', '65']) expect(() => parseWorkerCount(bad)).toThrow(/WORKERS/);
  });
});

describe('claimPort', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'claim-port-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function listening(): Promise<net.Server> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', () => resolve()));
    return server;
  }

  it('skips a port something listens on', async () => {
    const server = await listening();
    const taken = (server.address() as net.AddressInfo).port;
    try {
      const claim = await claimPort(taken, dir, 5);
      expect(claim.port).toBeGreaterThan(taken);
      claim.release();
    } finally {
      server.close();
    }
  });

  it('skips a port another live process claimed, takes over one whose claimant is gone, releases', async () => {
    // A free port range to work in: the one a listener got, after closing it.
    const server = await listening();
    const from = (server.address() as net.AddressInfo).port;
    await new Promise((r) => server.close(r));
    writeFileSync(path.join(dir, `${from}.pid`), String(process.ppid)); // alive: our parent
    const first = await claimPort(from, dir, 5);
    expect(first.port).toBeGreaterThan(from);
    expect(readFileSync(path.join(dir, `${first.port}.pid`), 'utf8')).toBe(String(process.pid));

    const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
    writeFileSync(path.join(dir, `${from}.pid`), String(dead));
    const second = await claimPort(from, dir, 5);
    expect(second.port).toBe(from);

    first.release();
    second.release();
    expect(existsSync(path.join(dir, `${first.port}.pid`))).toBe(false);
    expect(existsSync(path.join(dir, `${from}.pid`))).toBe(false);
  });
});

describe('supervised', () => {
  it('reports the exit of a real child once, with code and signal', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    const handle = supervised(child);
    expect(handle.pid).toBe(child.pid);
    const exits: Array<[number | null, string | null]> = [];
    const exited = new Promise<void>((resolve) => handle.onExit((code, signal) => (exits.push([code, signal]), resolve())));
    handle.kill('SIGKILL');
    await exited;
    handle.kill('SIGTERM'); // after the exit: nothing happens
    expect(exits).toEqual([[null, 'SIGKILL']]);
  });

  it('reports a child that could not be spawned as an exit without code or signal', async () => {
    const handle = supervised(spawn('/nonexistent/bridge-binary', [], { stdio: 'ignore' }));
    const exit = await new Promise<[number | null, string | null]>((resolve) => handle.onExit((code, signal) => resolve([code, signal])));
    expect(exit).toEqual([null, null]);
  });
});
