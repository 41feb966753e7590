import net from 'node:net';
import type { ISocketFactory } from '#plumbing/kafka/types.ts';

/** Kafka's api key of a Produce request. */
const PRODUCE = 0;

/**
 * Cuts a byte stream into Kafka frames (a 4-byte big-endian size, then that many bytes), however
 * the stream was split into chunks.
 */
class FrameReader {
  #pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Buffer[] {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const frames: Buffer[] = [];
    while (this.#pending.length >= 4) {
      const size = this.#pending.readInt32BE(0);
      if (this.#pending.length < 4 + size) break;
      frames.push(this.#pending.subarray(0, 4 + size));
      this.#pending = this.#pending.subarray(4 + size);
    }
    return frames;
  }
}

export interface HeldAnswer {
  correlationId: number;
  /** When the Produce request was passed on to the broker (Date.now()). */
  forwardedAt: number;
}

/**
 * A TCP proxy in front of one Kafka broker that can hold the broker's answers to Produce requests.
 * Every request passes at once and unchanged, so the broker appends the records; an answer that is
 * held reaches the client only after `holdMs` (never, with Infinity). Held longer than the client's
 * request timeout, it is what a slow or briefly partitioned broker looks like to the client: the
 * request timed out, and yet the records are on the log. Other answers on the same connection
 * pass in the meantime (a Kafka client matches answers to requests by correlation id).
 */
export class ProduceHoldProxy {
  readonly #server: net.Server;
  readonly #target: { host: string; port: number };
  readonly #sockets = new Set<net.Socket>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #heldListeners: Array<(held: HeldAnswer) => void> = [];
  #toHold = 0;
  #holdMs = 0;
  /** Produce requests passed on to the broker, held or not. */
  produceRequests = 0;
  /** Produce answers held back. */
  readonly held: HeldAnswer[] = [];
  port = 0;

  constructor(target: { host: string; port: number }) {
    this.#target = target;
    this.#server = net.createServer((client) => this.#accept(client));
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as net.AddressInfo).port;
    return this.port;
  }

  /** The answers to the next `count` Produce requests (on any connection) are held for `holdMs`. */
  holdProduceAnswers(count: number, holdMs: number): void {
    this.#toHold = count;
    this.#holdMs = holdMs;
  }

  /** Resolves once a Produce request whose answer is held has been passed on to the broker. */
  nextHeld(): Promise<HeldAnswer> {
    return new Promise((resolve) => this.#heldListeners.push(resolve));
  }

  #accept(client: net.Socket): void {
    const upstream = net.connect({ ...this.#target, noDelay: true });
    client.setNoDelay(true);
    this.#sockets.add(client).add(upstream);
    // Correlation ids of this connection's Produce requests whose answers are held.
    const holding = new Set<number>();
    const requests = new FrameReader();
    const answers = new FrameReader();
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    };
    client.on('data', (chunk: Buffer) => {
      for (const frame of requests.push(chunk)) {
        // Request header: size, api key (int16), api version (int16), correlation id (int32).
        if (frame.readInt16BE(4) === PRODUCE) {
          this.produceRequests += 1;
          if (this.#toHold > 0) {
            this.#toHold -= 1;
            const held = { correlationId: frame.readInt32BE(8), forwardedAt: Date.now() };
            holding.add(held.correlationId);
            this.held.push(held);
            upstream.write(frame);
            for (const listener of this.#heldListeners.splice(0)) listener(held);
            continue;
          }
        }
        upstream.write(frame);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      for (const frame of answers.push(chunk)) {
        // Answer header: size, correlation id (int32).
        const correlationId = frame.readInt32BE(4);
        if (!holding.delete(correlationId)) {
          client.write(frame);
          continue;
        }
        if (this.#holdMs === Infinity) continue;
        const timer = setTimeout(() => {
          this.#timers.delete(timer);
          if (!client.destroyed) client.write(frame);
        }, this.#holdMs);
        this.#timers.add(timer);
      }
    });
    for (const socket of [client, upstream]) {
      socket.on('error', close);
      socket.on('close', close);
    }
  }

  /**
   * A kafkajs socket factory that reaches the broker through this proxy whatever address kafkajs
   * asks for (the seed broker, or the address the broker advertises in its metadata).
   */
  socketFactory(): ISocketFactory {
    return ({ onConnect }) => {
      const socket = net.connect({ host: '127.0.0.1', port: this.port, noDelay: true }, onConnect);
      socket.setKeepAlive(true, 60_000);
      return socket;
    };
  }

  async close(): Promise<void> {
    for (const timer of this.#timers) clearTimeout(timer);
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
