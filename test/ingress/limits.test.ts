import { once } from 'node:events';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ingressConfigFromEnv, ingressEnvSchema } from '#services/ingress/config.ts';
import { testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { post, signedRequest, startTestIngress, INGRESS_BASE_ENV, INGRESS_SECRET_ENV } from '../kit/ingress.ts';
import type { IngressHandle } from '#services/ingress/ingress.ts';
import { eventually } from '../kit/eventually.ts';

/** A raw HTTP/1.1 client: the test decides when each part of the request goes out. */
class RawClient {
  readonly socket: net.Socket;
  answer = '';
  closed = false;
  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.on('data', (c: Buffer) => (this.answer += c.toString()));
    this.socket.on('close', () => (this.closed = true));
    this.socket.on('error', () => {});
  }
  async connected(): Promise<void> {
    await once(this.socket, 'connect');
  }
  /** Request line and headers of a signed-looking webhook; the body is sent later (or never). */
  head(path: string, headers: Record<string, string>): void {
    const lines = [
      `POST ${path} HTTP/1.1`,
      'Host: x',
      'Content-Type: application/json',
      'X-Webhook-Id: evt_x',
      'X-Webhook-Timestamp: 1',
      'X-Webhook-Signature: v1=00',
    ];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    this.socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  }
  status(): number | undefined {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(this.answer);
    return m ? Number(m[1]) : undefined;
  }
  header(name: string): string | undefined {
    const m = new RegExp(`^${name}: (.*)$`, 'im').exec(this.answer.split('\r\n\r\n')[0] ?? '');
    return m?.[1]?.trim();
  }
}

async function metric(ingress: IngressHandle, pattern: RegExp): Promise<number | undefined> {
  const text = await (await fetch(`${ingress.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => pattern.test(l));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

const port = (ingress: IngressHandle) => Number(new URL(ingress.url).port);

describe('ingress limits on what unauthenticated clients can hold', () => {
  const kafka = testKafka();
  const topic = useTestTopics(kafka, { eventsPartitions: 1, retryLevels: 0 }).names.events;

  it('the connection, body and deadline limits come from the environment, with their defaults', () => {
    const base = INGRESS_BASE_ENV;
    const raw = INGRESS_SECRET_ENV;
    const defaults = ingressConfigFromEnv(ingressEnvSchema.parse(base), raw);
    expect(defaults).toMatchObject({
      maxConnections: 1024,
      maxInflightBodyBytes: 64 * 1024 * 1024,
      keepAliveTimeoutMs: 5000,
      adminHost: '127.0.0.1',
      maxClientBodyBytes: 8 * 1024 * 1024,
      bodyIdleTimeoutMs: 5000,
      bodyTimeoutMs: 10_000,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
    });
    const set = ingressConfigFromEnv(
      ingressEnvSchema.parse({
        ...base,
        MAX_CONNECTIONS: '10',
        MAX_INFLIGHT_BODY_BYTES: '2048',
        KEEP_ALIVE_TIMEOUT_MS: '65000',
        ADMIN_HOST: '0.0.0.0',
        MAX_CLIENT_BODY_BYTES: '1024',
        BODY_IDLE_TIMEOUT_MS: '700',
        BODY_TIMEOUT_MS: '2000',
      }),
      raw,
    );
    expect(set).toMatchObject({
      maxConnections: 10,
      maxInflightBodyBytes: 2048,
      keepAliveTimeoutMs: 65000,
      adminHost: '0.0.0.0',
      maxClientBodyBytes: 1024,
      bodyIdleTimeoutMs: 700,
      bodyTimeoutMs: 2000,
    });
    expect(() => ingressEnvSchema.parse({ ...base, BODY_IDLE_TIMEOUT_MS: '0' })).toThrow();
    expect(() => ingressEnvSchema.parse({ ...base, KEEP_ALIVE_TIMEOUT_MS: '0' })).toThrow();
  });

  it('closes a keep-alive connection left idle past keepAliveTimeoutMs, and keeps one that is not', async () => {
    const ingress = await startTestIngress(testBrokers(), topic, { keepAliveTimeoutMs: 300 });
    const longer = await startTestIngress(testBrokers(), topic, { keepAliveTimeoutMs: 60_000 });
    const idle = new RawClient(port(ingress));
    await idle.connected();
    const kept = new RawClient(port(longer));
    await kept.connected();
    try {
      for (const c of [idle, kept]) {
        c.head('/webhooks/acme', { 'Content-Length': '2' });
        c.socket.write('{}');
        await eventually(() => c.status() !== undefined, { timeoutMs: 5000, message: 'an answer' });
        expect(c.status()).toBe(401);
        expect(c.header('Connection')?.toLowerCase()).toBe('keep-alive');
      }
      const answered = Date.now();
      await eventually(() => idle.closed, { timeoutMs: 5000, message: 'the idle connection to be closed' });
      expect(Date.now() - answered).toBeGreaterThanOrEqual(250);
      expect(kept.closed).toBe(false);
    } finally {
      idle.socket.destroy();
      kept.socket.destroy();
      await ingress.close();
      await longer.close();
    }
  });

  it('refuses connections over maxConnections and counts them', async () => {
    // Every socket here comes from one address: its share is the whole cap, so the cap is what refuses.
    const ingress = await startTestIngress(testBrokers(), topic, { maxConnections: 4, maxClientConnections: 4 });
    const held: RawClient[] = [];
    try {
      for (let i = 0; i < 4; i += 1) {
        const c = new RawClient(port(ingress));
        await c.connected();
        held.push(c);
      }
      // The port has several listening sockets, accepted from in no fixed order: the four are in
      // before the fifth comes.
      await eventually(async () => (await metric(ingress, /^webhook_open_connections /)) === 4, {
        timeoutMs: 5000,
        message: 'the four connections to be accepted',
      });
      // The ingress accepts the TCP connection and closes it at once: no request is read from it.
      const extra = new RawClient(port(ingress));
      await extra.connected().catch(() => {});
      extra.head('/webhooks/acme', { 'Content-Length': '2' });
      await eventually(() => extra.closed, { timeoutMs: 5000, message: 'the connection over the cap to be closed' });
      expect(extra.answer).toBe('');
      expect(await metric(ingress, /^webhook_overload_refusals_total\{reason="max_connections"\}/)).toBe(1);
      // The held connections still work.
      held[0]!.head('/webhooks/acme', { 'Content-Length': '2' });
      held[0]!.socket.write('{}');
      await eventually(() => held[0]!.status() !== undefined, { timeoutMs: 5000, message: 'an answer on a held connection' });
      expect(held[0]!.status()).toBe(401);
    } finally {
      for (const c of held) c.socket.destroy();
      await ingress.close();
    }
  });

  it('holds only the body bytes that arrived, and answers 503 with Retry-After to the body that would pass the budget', async () => {
    const ingress = await startTestIngress(testBrokers(), topic, { maxInflightBodyBytes: 100 * 1024 });
    const clients: RawClient[] = [];
    try {
      // Two requests each declare 40 KiB: a declared length costs nothing until the bytes come.
      for (let i = 0; i < 2; i += 1) {
        const c = new RawClient(port(ingress));
        await c.connected();
        c.head('/webhooks/acme', { 'Content-Length': String(40 * 1024) });
        clients.push(c);
      }
      await eventually(() => ingress.activeRequests() === 2, { timeoutMs: 5000, message: 'two requests in' });
      expect(await metric(ingress, /^webhook_inflight_body_bytes /)).toBe(0);
      // Each sends all but its last byte: now held.
      for (const c of clients) c.socket.write(Buffer.alloc(40 * 1024 - 1, 0x20));
      const held = 2 * (40 * 1024 - 1);
      await eventually(async () => (await metric(ingress, /^webhook_inflight_body_bytes /)) === held, {
        timeoutMs: 5000,
        message: '80 KiB held',
      });
      const third = new RawClient(port(ingress));
      await third.connected();
      third.head('/webhooks/acme', { 'Content-Length': String(40 * 1024) });
      third.socket.write(Buffer.alloc(40 * 1024, 0x20));
      await eventually(() => third.status() !== undefined, { timeoutMs: 5000, message: 'an answer to the request over the budget' });
      expect(third.status()).toBe(503);
      expect(third.header('retry-after')).toBe('5');
      expect(third.header('connection')).toBe('close');
      expect(third.answer).toContain('{"error":"unavailable"}');
      await eventually(() => third.closed, { timeoutMs: 5000, message: 'the refused connection to close' });
      expect(await metric(ingress, /^webhook_overload_refusals_total\{reason="inflight_body_bytes"\}/)).toBe(1);
      expect(await metric(ingress, /^webhook_inflight_body_bytes /)).toBe(held);
      // A small request still fits.
      const small = new RawClient(port(ingress));
      await small.connected();
      small.head('/webhooks/acme', { 'Content-Length': '2' });
      small.socket.write('{}');
      await eventually(() => small.status() !== undefined, { timeoutMs: 5000, message: 'an answer to the small request' });
      expect(small.status()).toBe(401);
      small.socket.destroy();

      // The held bodies end: each is answered (401: not signed) and its bytes are released.
      for (const c of clients) c.socket.write(' ');
      await eventually(() => clients.every((c) => c.status() !== undefined), { timeoutMs: 5000, message: 'answers to the held requests' });
      expect(clients.map((c) => c.status())).toEqual([401, 401]);
      await eventually(async () => (await metric(ingress, /^webhook_inflight_body_bytes /)) === 0, {
        timeoutMs: 5000,
        message: 'the budget released',
      });
      // A real webhook goes through once the budget is free again.
      expect((await post(ingress.url, signedRequest())).status).toBe(202);
    } finally {
      for (const c of clients) c.socket.destroy();
      await ingress.close();
    }
  });

  it('a chunked body that grows past the budget is cut off with 503; an aborted body releases its bytes', async () => {
    const ingress = await startTestIngress(testBrokers(), topic, { maxInflightBodyBytes: 64 * 1024 });
    try {
      const chunked = new RawClient(port(ingress));
      await chunked.connected();
      chunked.head('/webhooks/acme', { 'Transfer-Encoding': 'chunked' });
      const chunk = (bytes: number) => chunked.socket.write(`${bytes.toString(16)}\r\n${' '.repeat(bytes)}\r\n`);
      chunk(32 * 1024);
      await eventually(async () => (await metric(ingress, /^webhook_inflight_body_bytes /)) === 32 * 1024, {
        timeoutMs: 5000,
        message: '32 KiB held',
      });
      expect(chunked.status()).toBeUndefined();
      chunk(40 * 1024);
      await eventually(() => chunked.status() !== undefined, { timeoutMs: 5000, message: 'an answer once the body passes the budget' });
      expect(chunked.status()).toBe(503);
      expect(chunked.header('retry-after')).toBe('5');
      await eventually(() => chunked.closed, { timeoutMs: 5000, message: 'the connection to close' });
      await eventually(async () => (await metric(ingress, /^webhook_inflight_body_bytes /)) === 0, {
        timeoutMs: 5000,
        message: 'the budget released after the refusal',
      });

      const aborted = new RawClient(port(ingress));
      await aborted.connected();
      aborted.head('/webhooks/acme', { 'Content-Length': String(30 * 1024) });
      aborted.socket.write(Buffer.alloc(10 * 1024, 0x20));
      // What arrived is held, not what was declared.
      await eventually(async () => (await metric(ingress, /^webhook_inflight_body_bytes /)) === 10 * 1024, {
        timeoutMs: 5000,
        message: 'the 10 KiB sent held',
      });
      aborted.socket.destroy();
      await eventually(async () => (await metric(ingress, /^webhook_inflight_body_bytes /)) === 0, {
        timeoutMs: 5000,
        message: 'the budget released after the abort',
      });
      expect(await metric(ingress, /^webhook_overload_refusals_total\{reason="inflight_body_bytes"\}/)).toBe(1);
    } finally {
      await ingress.close();
    }
  });
});
