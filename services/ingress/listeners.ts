import type http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';

// The ingress's port as several listening sockets of this one process (SO_REUSEPORT), the kernel
// spreading new connections over them. libuv accepts one connection per listening socket and
// event-loop turn (libuv/libuv#3696). A busy ingress turns a few hundred times a second, so with
// one socket a burst of new connections (a provider's pool opening at once, or senders without
// keep-alive) queued in the kernel for seconds while requests on open connections were answered
// in milliseconds; each further socket adds an accept to every turn.

export interface ListenerGroupOptions {
  port: number;
  host: string;
  /** How many listening sockets; 1 listens as a plain server does (no SO_REUSEPORT). */
  sockets: number;
  /** Open connections across every socket; past it a new connection is closed as soon as it is accepted. */
  maxConnections: number;
  /** A connection closed over maxConnections. */
  onDrop: () => void;
}

/**
 * One request handler behind several http.Servers on one port. Everything a caller would do to one
 * server (close, closeIdleConnections, ...) is done to each.
 */
export class ListenerGroup {
  readonly servers: http.Server[];
  #open = 0;
  #port = 0;
  readonly #options: ListenerGroupOptions;

  constructor(options: ListenerGroupOptions, create: () => http.Server) {
    this.#options = options;
    this.servers = Array.from({ length: Math.max(1, options.sockets) }, create);
  }

  /** Connections open right now, across every listening socket. */
  get openConnections(): number {
    return this.#open;
  }

  get port(): number {
    return this.#port;
  }

  get sockets(): number {
    return this.servers.length;
  }

  /**
   * Binds every socket. A port another process holds fails with EADDRINUSE as a plain listen does,
   * even when that process set SO_REUSEPORT too: a probe binds the port alone first (port 0
   * picks the port here), then the group binds it together. Where SO_REUSEPORT is missing
   * (not Linux), one socket listens.
   */
  async listen(): Promise<number> {
    const { host } = this.#options;
    if (this.servers.length === 1) {
      this.#port = await listenOn(this.servers[0]!, { port: this.#options.port, host });
      return this.#port;
    }
    const probe = net.createServer();
    const port = await listenOn(probe, { port: this.#options.port, host });
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    try {
      await listenOn(this.servers[0]!, { port, host, reusePort: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') throw error;
      // No SO_REUSEPORT on this platform: one socket.
      this.servers.splice(1);
      this.#port = await listenOn(this.servers[0]!, { port, host });
      return this.#port;
    }
    try {
      for (const server of this.servers.slice(1)) await listenOn(server, { port, host, reusePort: true });
    } catch (error) {
      await this.close();
      throw error;
    }
    this.#port = port;
    return port;
  }

  /** Stops accepting on every socket; resolves once each server has closed. */
  close(): Promise<void> {
    return Promise.all(
      this.servers.map((server) => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()))),
    ).then(() => undefined);
  }

  closeIdleConnections(): void {
    for (const server of this.servers) server.closeIdleConnections();
  }

  closeAllConnections(): void {
    for (const server of this.servers) server.closeAllConnections();
  }

  /**
   * Call first from each server's 'connection' listener. The cap counts every socket's connections
   * (a server's own maxConnections would count only its share); over it the connection is
   * destroyed before a byte of it is read, and false says to leave it alone.
   */
  admit(socket: Socket): boolean {
    if (this.#open >= this.#options.maxConnections) {
      this.#options.onDrop();
      socket.destroy();
      return false;
    }
    this.#open += 1;
    socket.once('close', () => {
      this.#open -= 1;
    });
    return true;
  }
}

function listenOn(server: net.Server, options: net.ListenOptions): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
