// Ports chosen at run time, so two suites on one machine do not collide. Only the machine's shared
// broker (9092) and Postgres (5432) keep fixed ports.
//
// They are drawn below Linux's ephemeral range (32768-60999): the outage tests stop a broker or a
// Postgres and start it again on the same port, and a port inside that range can meanwhile be
// taken by any outgoing connection (the likely reason a failover broker once exited at start).
import net from 'node:net';

const LOWEST = 20_000;
const BELOW_EPHEMERAL = 32_768;

async function canListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (error: NodeJS.ErrnoException) =>
      // A host without IPv6 cannot hold the port there either.
      resolve(error.code === 'EAFNOSUPPORT' || error.code === 'EADDRNOTAVAIL'),
    );
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

async function isFree(port: number): Promise<boolean> {
  return (await canListen(port, '0.0.0.0')) && (await canListen(port, '::'));
}

/**
 * `count` consecutive ports that nothing listens on, the first returned (a LocalKafka's basePort:
 * two per broker). Two callers at the same moment may still draw the same ports, rarely.
 */
export async function freePortRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const first = LOWEST + Math.floor(Math.random() * (BELOW_EPHEMERAL - LOWEST - count));
    let free = true;
    for (let port = first; port < first + count && free; port += 1) free = await isFree(port);
    if (free) return first;
  }
  throw new Error(`no ${count} free consecutive ports in ${LOWEST}-${BELOW_EPHEMERAL - 1}`);
}

/** A TCP port that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return freePortRange(1);
}
