import http from 'node:http';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { ingressConfigFromEnv, ingressEnvSchema } from '#services/ingress/config.ts';
import type { IngressHandle } from '#services/ingress/ingress.ts';
import { testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { eventually } from '../kit/eventually.ts';
import { signedRequest, startTestIngress, type SignedRequest, INGRESS_BASE_ENV, INGRESS_SECRET_ENV } from '../kit/ingress.ts';

// One client address holding every keep-alive socket it can must not shut other providers out:
// each address (an IPv4 address, an IPv6 /64, an IPv4-mapped IPv6 address as its IPv4 address)
// gets a share of the connection slots, and the global cap stays.

const MAX_CONNECTIONS = 40;
const SHARE = 10;

/** A raw socket from a chosen loopback address, opened and then held idle (or used by the test). */
class HeldSocket {
  readonly socket: net.Socket;
  answer = '';
  closed = false;
  constructor(port: number, host: string, from: string) {
    this.socket = net.connect({ port, host, localAddress: from });
    this.socket.on('data', (c: Buffer) => (this.answer += c.toString('latin1')));
    this.socket.on('close', () => (this.closed = true));
    this.socket.on('error', () => {});
  }
  connected(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.socket.connecting) resolve();
      else this.socket.once('connect', () => resolve()).once('close', () => resolve());
    });
  }
  write(signed: SignedRequest): void {
    const lines = [`POST ${signed.path} HTTP/1.1`, 'Host: x', `Content-Length: ${signed.body.length}`];
    for (const [name, value] of signed.headers) lines.push(`${name}: ${value}`);
    this.socket.write(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), signed.body]));
  }
  status(): number | undefined {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(this.answer);
    return m ? Number(m[1]) : undefined;
  }
}

interface Outcome {
  status: number | string;
  headers?: http.IncomingHttpHeaders;
  body?: string;
}

/** A signed POST the way a provider's node:http client sends it; a refused connection is its error code. */
function postFrom(port: number, host: string, signed: SignedRequest, agent: http.Agent): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = http.request({ method: 'POST', host, port, path: signed.path, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (error: NodeJS.ErrnoException) => resolve({ status: error.code ?? error.message }));
    });
    for (const [name, value] of signed.headers) req.setHeader(name, value);
    req.setHeader('content-length', String(signed.body.length));
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ status: error.code ?? error.message }));
    req.end(signed.body);
  });
}

async function metric(ingress: IngressHandle, pattern: RegExp): Promise<number | undefined> {
  const text = await (await fetch(`${ingress.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => pattern.test(l));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

const refusals = (ingress: IngressHandle, reason: string) =>
  metric(ingress, new RegExp(`^webhook_overload_refusals_total\\{reason="${reason}"\\}`));

describe('connection slots shared out per client address', () => {
  const kafka = testKafka();
  const topic = useTestTopics(kafka, { eventsPartitions: 1, retryLevels: 0 }).names.events;
  const agents: http.Agent[] = [];

  afterAll(() => {
    for (const agent of agents) agent.destroy();
  });

  const providerAgent = (from: string, keepAlive = true) => {
    const agent = new http.Agent({ keepAlive, maxSockets: 4, localAddress: from });
    agents.push(agent);
    return agent;
  };

  it('MAX_CLIENT_CONNECTIONS defaults to a quarter of MAX_CONNECTIONS and can be set', () => {
    const base = INGRESS_BASE_ENV;
    const raw = INGRESS_SECRET_ENV;
    const config = (env: Record<string, string>) => ingressConfigFromEnv(ingressEnvSchema.parse({ ...base, ...env }), raw);
    expect(config({})).toMatchObject({ maxConnections: 1024, maxClientConnections: 256 });
    expect(config({ MAX_CONNECTIONS: '40' })).toMatchObject({ maxConnections: 40, maxClientConnections: 10 });
    expect(config({ MAX_CONNECTIONS: '3' })).toMatchObject({ maxConnections: 3, maxClientConnections: 1 });
    expect(config({ MAX_CONNECTIONS: '40', MAX_CLIENT_CONNECTIONS: '40' })).toMatchObject({ maxConnections: 40, maxClientConnections: 40 });
    expect(() => ingressEnvSchema.parse({ ...base, MAX_CLIENT_CONNECTIONS: '0' })).toThrow();
  });

  // '::' listens on both stacks: IPv4 clients arrive as ::ffff:127.0.0.x and must still be told
  // apart by their IPv4 address (not lumped into one ::ffff:0:0 /64), and ::1 is a client of its own.
  it.each([
    ['127.0.0.1', ['127.0.0.2', '127.0.0.3']],
    ['::', ['127.0.0.2', '::1']],
  ])('listening on %s, one address holding every socket it can leaves providers on %j their 202s', async (listen, providers) => {
    const ingress = await startTestIngress(testBrokers(), topic, {
      host: listen,
      maxConnections: MAX_CONNECTIONS,
      maxClientConnections: SHARE,
      // One listening socket: connections are accepted in the order they were opened, which the
      // assertions below name (with several, the kernel queues them per socket).
      listenSockets: 1,
    });
    const port = Number(new URL(ingress.url).port);
    const hog: HeldSocket[] = [];
    try {
      // The hog opens as many sockets as the whole cap and holds them idle.
      for (let i = 0; i < MAX_CONNECTIONS; i += 1) {
        const socket = new HeldSocket(port, '127.0.0.1', '127.0.0.1');
        await socket.connected();
        hog.push(socket);
      }
      // Providers on other addresses get their 202s while the hog holds on.
      const outcomes = await Promise.all(
        providers.flatMap((from) => {
          const agent = providerAgent(from);
          const host = from.includes(':') ? '::1' : '127.0.0.1';
          return Array.from({ length: 6 }, () => postFrom(port, host, signedRequest(), agent));
        }),
      );
      expect(outcomes.map((o) => o.status)).toEqual(Array<number>(outcomes.length).fill(202));

      // Everything past its share is closed: at once, or after a short wait for a request to answer.
      await eventually(() => hog.filter((s) => s.closed).length === MAX_CONNECTIONS - SHARE, {
        timeoutMs: 30_000,
        message: `the hog's sockets past its share of ${SHARE} to be closed (${hog.filter((s) => s.closed).length} closed)`,
      });
      expect(hog.slice(0, SHARE).every((s) => !s.closed)).toBe(true);
      expect(hog.every((s) => s.answer === '')).toBe(true);
      expect(await refusals(ingress, 'client_connections')).toBe(MAX_CONNECTIONS - SHARE);

      // The hog's held sockets still work.
      hog[0]!.write(signedRequest());
      await eventually(() => hog[0]!.status() !== undefined, { timeoutMs: 30_000, message: 'an answer on a held socket' });
      expect(hog[0]!.status()).toBe(202);

      // A request on one more socket from the hog's address is answered 429 with Retry-After and the
      // connection closed: what its HTTP client reports is an answer, not a reset.
      const refused = await postFrom(port, '127.0.0.1', signedRequest(), providerAgent('127.0.0.1', false));
      expect(refused.status).toBe(429);
      expect(refused.headers?.['retry-after']).toBe('5');
      expect(refused.headers?.connection).toBe('close');
      expect(JSON.parse(refused.body ?? '')).toEqual({ error: 'too_many_requests' });
      expect(await refusals(ingress, 'client_connections')).toBe(MAX_CONNECTIONS - SHARE + 1);
      // The global cap was never what refused anyone.
      expect(await refusals(ingress, 'max_connections')).toBe(0);

      // Once the hog lets go, its address has its share again.
      for (const socket of hog) socket.socket.destroy();
      await eventually(async () => (await postFrom(port, '127.0.0.1', signedRequest(), providerAgent('127.0.0.1', false))).status === 202, {
        timeoutMs: 30_000,
        message: 'a 202 for the hog address once its sockets are closed',
      });
    } finally {
      for (const socket of hog) socket.socket.destroy();
      await ingress.close();
    }
  });

  it('the global cap still holds when every address stays within its share', async () => {
    // One listening socket: the fifth connection is accepted last (see above).
    const ingress = await startTestIngress(testBrokers(), topic, { maxConnections: 4, maxClientConnections: 2, listenSockets: 1 });
    const port = Number(new URL(ingress.url).port);
    const held: HeldSocket[] = [];
    try {
      for (const from of ['127.0.0.1', '127.0.0.1', '127.0.0.2', '127.0.0.2']) {
        const socket = new HeldSocket(port, '127.0.0.1', from);
        await socket.connected();
        held.push(socket);
      }
      const extra = new HeldSocket(port, '127.0.0.1', '127.0.0.3');
      held.push(extra);
      await extra.connected();
      await eventually(() => extra.closed, { timeoutMs: 30_000, message: 'the connection over the global cap to be closed' });
      expect(await refusals(ingress, 'max_connections')).toBe(1);
      expect(await refusals(ingress, 'client_connections')).toBe(0);
      expect(held.slice(0, 4).every((s) => !s.closed)).toBe(true);
    } finally {
      for (const socket of held) socket.socket.destroy();
      await ingress.close();
    }
  });
});
