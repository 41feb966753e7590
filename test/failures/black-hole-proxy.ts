import net from 'node:net';

/** One direction of a proxied connection: bytes pass, or wait in order while the link is cut. */
class Lane {
  readonly #held: Array<Buffer | null> = [];
  #dropped = false;
  constructor(
    readonly to: net.Socket,
    readonly isCut: () => boolean,
  ) {}

  push(chunk: Buffer | null): void {
    if (this.#dropped) return;
    if (this.isCut() || this.#held.length > 0) this.#held.push(chunk);
    else this.#write(chunk);
  }

  /** Nothing more passes, ever. */
  drop(): void {
    this.#dropped = true;
    this.#held.length = 0;
  }

  flush(): void {
    while (this.#held.length > 0 && !this.isCut()) this.#write(this.#held.shift()!);
  }

  #write(chunk: Buffer | null): void {
    if (this.to.destroyed) return;
    if (chunk === null) this.to.end();
    else this.to.write(chunk);
  }
}

/**
 * A TCP proxy in front of a server that can black-hole the link: while it does, no byte passes in
 * either direction and no connection is refused or reset; new connections are accepted and then
 * get no answer. That is a network partition as the two ends see it (packets dropped, TCP
 * retransmitting), short enough that neither kernel gives up on the connection: when the link
 * heals, what was sent meanwhile arrives, as retransmission would deliver it.
 */
export class BlackHoleProxy {
  readonly #server: net.Server;
  readonly #target: { host: string; port: number };
  readonly #lanes = new Set<Lane>();
  readonly #sockets = new Set<net.Socket>();
  #cut = false;
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

  get connections(): number {
    return this.#sockets.size / 2;
  }

  #accept(client: net.Socket): void {
    const upstream = net.connect(this.#target);
    const cut = () => this.#cut;
    const up = new Lane(upstream, cut);
    const down = new Lane(client, cut);
    this.#lanes.add(up).add(down);
    this.#sockets.add(client).add(upstream);
    // A reset or error on one side is passed on as a close of the other (what a router in the
    // middle would let through once the link works).
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.#lanes.delete(up);
      this.#lanes.delete(down);
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    };
    for (const [from, lane] of [
      [client, up],
      [upstream, down],
    ] as const) {
      from.on('data', (chunk: Buffer) => lane.push(chunk));
      from.on('end', () => lane.push(null));
      from.on('error', () => (this.#lanes.has(lane) ? close() : undefined));
      // A side that closes during the cut: its FIN reaches the other side once the link heals.
      from.on('close', () => (this.#cut || !this.#lanes.has(lane) ? lane.push(null) : close()));
    }
  }

  /** From now on no byte passes in either direction; what is sent waits, in order. */
  blackHole(): void {
    this.#cut = true;
  }

  /**
   * The link comes back: everything held passes, in order. With `dropOpen`, the connections open
   * until now stay black-holed for good (as when a stateful firewall or NAT lost their state, or
   * the address moved to another machine): no byte, no FIN, no reset, ever; new ones pass.
   */
  heal(options: { dropOpen?: boolean } = {}): void {
    if (options.dropOpen) {
      for (const lane of this.#lanes) lane.drop();
      this.#lanes.clear();
    }
    this.#cut = false;
    for (const lane of this.#lanes) lane.flush();
  }

  async close(): Promise<void> {
    this.#cut = false;
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
