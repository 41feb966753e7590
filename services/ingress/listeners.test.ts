import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ListenerGroup } from './listeners.ts';

const groups: ListenerGroup[] = [];
const sockets: net.Socket[] = [];
const counters: Array<() => void> = [];

afterEach(async () => {
  for (const stop of counters.splice(0)) stop();
  for (const s of sockets.splice(0)) s.destroy();
  for (const g of groups.splice(0)) {
    g.closeAllConnections();
    await g.close();
  }
});

/** A group whose every server answers 204 and counts, per turn of the event loop, the connections it accepted. */
function group(sockets: number, maxConnections = 1000, onDrop = () => {}) {
  const acceptedPerTurn = new Map<number, number>();
  let turn = 0;
  const g: ListenerGroup = new ListenerGroup({ port: 0, host: '127.0.0.1', sockets, maxConnections, onDrop }, () => {
    const server = http.createServer((_req, res) => res.writeHead(204).end());
    server.on('connection', (socket: net.Socket) => {
      if (!g.admit(socket)) return;
      acceptedPerTurn.set(turn, (acceptedPerTurn.get(turn) ?? 0) + 1);
    });
    return server;
  });
  groups.push(g);
  // setImmediate runs once per turn, after the poll phase that accepts.
  let counting = true;
  const tick = () => {
    turn += 1;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  const stopCounting = () => {
    counting = false;
  };
  counters.push(stopCounting);
  return { g, acceptedPerTurn, stopCounting };
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
    sockets.push(s);
  });
}

/** Opens n connections while this event loop is held, so they all wait in the kernel's accept queues at once. */
async function burst(port: number, n: number): Promise<void> {
  const opening = Array.from({ length: n }, () => connect(port));
  // The handshakes complete in the kernel whatever this thread does; hold the loop meanwhile.
  const until = Date.now() + 100;
  while (Date.now() < until) {
    // busy: nothing is accepted until the loop turns again
  }
  await Promise.all(opening);
}

async function until(check: () => boolean): Promise<void> {
  // Liveness only: a few turns of the loop are enough; the bound is far above that.
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('ListenerGroup', () => {
  it('accepts one connection per turn with one socket, and several per turn with four (libuv accepts once per socket and turn)', async () => {
    const one = group(1);
    await burst(await one.g.listen(), 64);
    await until(() => one.g.openConnections === 64);
    one.stopCounting();
    expect(Math.max(...one.acceptedPerTurn.values())).toBe(1);

    const four = group(4);
    await burst(await four.g.listen(), 64);
    await until(() => four.g.openConnections === 64);
    four.stopCounting();
    // The kernel spreads the 64 connections over the four sockets by their addresses: each turn takes
    // one from every socket that has one waiting.
    expect(Math.max(...four.acceptedPerTurn.values())).toBeGreaterThan(1);
    expect(Math.max(...four.acceptedPerTurn.values())).toBeLessThanOrEqual(4);
    expect(four.acceptedPerTurn.size).toBeLessThan(64);
  });

  it('serves requests on every socket of the port', async () => {
    const { g } = group(4);
    const port = await g.listen();
    expect(g.sockets).toBe(4);
    const statuses = await Promise.all(
      Array.from({ length: 40 }, () =>
        fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}', headers: { connection: 'close' } }).then((r) => r.status),
      ),
    );
    expect(statuses).toEqual(Array.from({ length: 40 }, () => 204));
  });

  it('caps open connections across the sockets, closing the ones over the cap unread', async () => {
    let dropped = 0;
    const { g } = group(4, 5, () => {
      dropped += 1;
    });
    const port = await g.listen();
    const closed: boolean[] = [];
    for (let i = 0; i < 12; i += 1) {
      const s = await connect(port);
      const index = closed.push(false) - 1;
      s.once('close', () => (closed[index] = true));
      s.resume();
    }
    await until(() => g.openConnections + dropped === 12);
    expect(g.openConnections).toBe(5);
    expect(dropped).toBe(7);
    await until(() => closed.filter(Boolean).length === 7);
  });

  it('fails with EADDRINUSE on a port another group holds, though both set SO_REUSEPORT', async () => {
    const first = group(4);
    const port = await first.g.listen();
    const refused = new ListenerGroup({ port, host: '127.0.0.1', sockets: 4, maxConnections: 10, onDrop: () => {} }, () =>
      http.createServer(),
    );
    await expect(refused.listen()).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await refused.close();
  });

  it('fails with EADDRINUSE on a port a plain server holds', async () => {
    const plain = net.createServer();
    const port = await new Promise<number>((resolve) =>
      plain.listen(0, '127.0.0.1', () => resolve((plain.address() as net.AddressInfo).port)),
    );
    try {
      const g = new ListenerGroup({ port, host: '127.0.0.1', sockets: 4, maxConnections: 10, onDrop: () => {} }, () => http.createServer());
      await expect(g.listen()).rejects.toMatchObject({ code: 'EADDRINUSE' });
      await g.close();
    } finally {
      await new Promise<void>((resolve) => plain.close(() => resolve()));
    }
  });
});
