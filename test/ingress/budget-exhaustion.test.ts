import net from 'node:net';
import { describe, expect, it } from 'vitest';
import type { IngressHandle } from '#services/ingress/ingress.ts';
import { testBrokers, testKafka, useTestTopics } from '../kit/kafka.ts';
import { post, signedRequest, startTestIngress } from '../kit/ingress.ts';
import { eventually, sleep } from '../kit/eventually.ts';

// An anonymous client must not be able to starve the ingress of its in-flight body budget or its
// sockets: nothing it declares is reserved before the bytes arrive, one address holds at most its
// share, and a body that stops arriving (or arrives too slowly) is cut off.

const MiB = 1024 * 1024;

/** A raw socket from a chosen loopback address: the test decides what goes out and when. */
class Attacker {
  readonly socket: net.Socket;
  answer = '';
  closed = false;
  constructor(port: number, from: string) {
    this.socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
    this.socket.on('data', (c: Buffer) => (this.answer += c.toString('latin1')));
    this.socket.on('close', () => (this.closed = true));
    this.socket.on('error', () => {});
  }
  /** Headers of a webhook that looks signed, declaring `length` body bytes. */
  head(length: number): void {
    this.socket.write(
      [
        'POST /webhooks/acme HTTP/1.1',
        'Host: x',
        'Content-Type: application/json',
        'X-Webhook-Id: evt_x',
        'X-Webhook-Timestamp: 1',
        'X-Webhook-Signature: v1=00',
        `Content-Length: ${length}`,
      ].join('\r\n') + '\r\n\r\n',
    );
  }
  status(): number | undefined {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(this.answer);
    return m ? Number(m[1]) : undefined;
  }
  header(name: string): string | undefined {
    return new RegExp(`^${name}: (.*)$`, 'im').exec(this.answer.split('\r\n\r\n')[0] ?? '')?.[1]?.trim();
  }
}

async function metric(ingress: IngressHandle, pattern: RegExp): Promise<number | undefined> {
  const text = await (await fetch(`${ingress.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => pattern.test(l));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

const portOf = (ingress: IngressHandle) => Number(new URL(ingress.url).port);

describe('the in-flight body budget against clients that never send their bodies', () => {
  const kafka = testKafka();
  const topic = useTestTopics(kafka, { eventsPartitions: 1, retryLevels: 0 }).names.events;

  it('64 sockets declaring 1 MiB and sending nothing, plus tricklers, do not keep a signed sender from 202 (defaults)', async () => {
    const ingress = await startTestIngress(testBrokers(), topic, { ackTimeoutMs: 20_000 });
    const port = portOf(ingress);
    const attackers = new Set<Attacker>();
    let stop = false;
    // Each attacker opens a new socket as soon as its last one is closed: the attack renews itself.
    const holdHeadersOnly = async (): Promise<void> => {
      while (!stop) {
        const a = new Attacker(port, '127.0.0.2');
        attackers.add(a);
        a.head(MiB);
        while (!a.closed && !stop) await sleep(50);
        attackers.delete(a);
        a.socket.destroy();
      }
    };
    const trickle = async (): Promise<void> => {
      while (!stop) {
        const a = new Attacker(port, '127.0.0.3');
        attackers.add(a);
        a.head(MiB);
        while (!a.closed && !stop) {
          a.socket.write(' ');
          await sleep(400);
        }
        attackers.delete(a);
        a.socket.destroy();
      }
    };
    const attack = [...Array.from({ length: 64 }, holdHeadersOnly), ...Array.from({ length: 4 }, trickle)];
    try {
      await eventually(() => ingress.activeRequests() >= 64, { timeoutMs: 10_000, message: 'the attacking requests to be in' });
      // The signed sender: one request every 50 ms for 8 s, each answered on its own.
      const answers: Array<Promise<number>> = [];
      let heldDuring = 0;
      for (let i = 0; i < 160; i += 1) {
        answers.push(
          post(ingress.url, signedRequest()).then(
            (a) => a.status,
            () => 0,
          ),
        );
        heldDuring = Math.max(heldDuring, ingress.activeRequests());
        await sleep(50);
      }
      const statuses = await Promise.all(answers);
      const accepted = statuses.filter((s) => s === 202).length;
      const others = statuses.filter((s) => s !== 202);
      expect(accepted / statuses.length, `not 202: ${JSON.stringify(others)}`).toBeGreaterThanOrEqual(0.99);
      // The attack was in place all along.
      expect(heldDuring).toBeGreaterThanOrEqual(64);
    } finally {
      stop = true;
      await Promise.all(attack);
      for (const a of attackers) a.socket.destroy();
      await ingress.close();
    }
  });

  it('one client address holds at most MAX_CLIENT_BODY_BYTES: the rest of its bodies are 429, other clients go on', async () => {
    const ingress = await startTestIngress(testBrokers(), topic, { bodyLimitBytes: 64 * 1024, maxClientBodyBytes: 256 * 1024 });
    const port = portOf(ingress);
    const fillers: Attacker[] = [];
    try {
      // Eight bodies of 60 KiB, sent but for their last byte: four fit in 256 KiB.
      for (let i = 0; i < 8; i += 1) {
        const a = new Attacker(port, '127.0.0.4');
        fillers.push(a);
        a.head(60 * 1024);
        a.socket.write(Buffer.alloc(60 * 1024 - 1, 0x20));
        await eventually(
          async () =>
            a.status() !== undefined || (await metric(ingress, /^webhook_inflight_body_bytes /))! >= Math.min(4, i + 1) * (60 * 1024 - 1),
          { timeoutMs: 5000, message: `filler ${i} read` },
        );
      }
      await eventually(() => fillers.filter((a) => a.status() !== undefined).length === 4, {
        timeoutMs: 5000,
        message: 'four fillers refused',
      });
      const refused = fillers.filter((a) => a.status() !== undefined);
      for (const a of refused) {
        expect(a.status()).toBe(429);
        expect(a.header('retry-after')).toBe('5');
        expect(a.header('connection')).toBe('close');
        expect(a.answer).toContain('{"error":"too_many_requests"}');
      }
      expect(await metric(ingress, /^webhook_inflight_body_bytes /)).toBe(4 * (60 * 1024 - 1));
      expect(await metric(ingress, /^webhook_overload_refusals_total\{reason="client_body_bytes"\}/)).toBe(4);
      // Another address is not held to the first one's share.
      expect((await post(ingress.url, signedRequest())).status).toBe(202);
    } finally {
      for (const a of fillers) a.socket.destroy();
      await ingress.close();
    }
  });

  it('cuts off a body that stops arriving or arrives too slowly, and headers that never end (408)', async () => {
    const ingress = await startTestIngress(testBrokers(), topic, {
      bodyIdleTimeoutMs: 500,
      bodyTimeoutMs: 1500,
      headersTimeoutMs: 1000,
      requestTimeoutMs: 30_000,
    });
    const port = portOf(ingress);
    const stalled = new Attacker(port, '127.0.0.5');
    const trickler = new Attacker(port, '127.0.0.5');
    const slowHeaders = new Attacker(port, '127.0.0.5');
    try {
      stalled.head(1024);
      stalled.socket.write('{');
      trickler.head(1024);
      slowHeaders.socket.write('POST /webhooks/acme HTTP/1.1\r\nHost: x\r\n');
      const trickling = setInterval(() => {
        trickler.socket.write(' ');
        slowHeaders.socket.write('X-Pad: 1\r\n');
      }, 200);
      try {
        // Liveness bound: below the 30 s request timeout, so each was cut off by its own timer
        // (the metrics below name which), far above the 0.5-1.5 s those timers take.
        await eventually(() => stalled.closed && trickler.closed && slowHeaders.closed, {
          timeoutMs: 20_000,
          message: 'all three cut off',
        });
      } finally {
        clearInterval(trickling);
      }
      for (const a of [stalled, trickler, slowHeaders]) expect(a.status(), a.answer).toBe(408);
      expect(stalled.answer).toContain('{"error":"request_timeout"}');
      expect(trickler.answer).toContain('{"error":"request_timeout"}');
      expect(await metric(ingress, /^webhook_overload_refusals_total\{reason="body_idle_timeout"\}/)).toBe(1);
      expect(await metric(ingress, /^webhook_overload_refusals_total\{reason="body_timeout"\}/)).toBe(1);
      expect(await metric(ingress, /^webhook_overload_refusals_total\{reason="headers_timeout"\}/)).toBe(1);
      expect(await metric(ingress, /^webhook_inflight_body_bytes /)).toBe(0);
      expect((await post(ingress.url, signedRequest())).status).toBe(202);
    } finally {
      for (const a of [stalled, trickler, slowHeaders]) a.socket.destroy();
      await ingress.close();
    }
  });
});
