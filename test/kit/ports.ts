// Ports chosen at run time, so two suites on one machine do not collide. Only the machine's shared
// broker (9092) and Postgres (5432) keep fixed ports.
//
// They are drawn below Linux's ephemeral range (32768-60999): the outage tests stop a broker or a
// Postgres and start it again on the same port, and a port inside that range can meanwhile be
// taken by any outgoing connection (the likely reason a failover broker once exited at start).
//
// A port is drawn free but bound later, often seconds later, by a broker or a service the test
// starts: in between, a test file running beside it must not draw the same port, nor may the same
// file draw it twice (a console once died at start on a port taken that way). So each vitest
// worker draws from a slice of the range of its own (VITEST_POOL_ID is unique among the workers
// running at once), and a process never hands out the same port twice.
import net from 'node:net';

const LOWEST = 20_000;
const BELOW_EPHEMERAL = 32_768;
const SLICES = 8;

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

/** The part of the range this process draws from: its vitest worker's slice, or all of it outside vitest. */
export function portSlice(poolId: string | undefined): { lowest: number; end: number } {
  const id = Number(poolId);
  if (!Number.isInteger(id) || id < 1) return { lowest: LOWEST, end: BELOW_EPHEMERAL };
  const size = Math.floor((BELOW_EPHEMERAL - LOWEST) / SLICES);
  const lowest = LOWEST + ((id - 1) % SLICES) * size;
  return { lowest, end: lowest + size };
}

const handedOut = new Set<number>();

/**
 * `count` consecutive ports that nothing listens on and that this process has not handed out
 * before, the first returned (a LocalKafka's basePort: two per broker).
 */
export async function freePortRange(count: number): Promise<number> {
  const { lowest, end } = portSlice(process.env.VITEST_POOL_ID);
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const first = lowest + Math.floor(Math.random() * (end - lowest - count));
    let free = true;
    for (let port = first; port < first + count && free; port += 1) free = !handedOut.has(port) && (await isFree(port));
    if (free) {
      for (let port = first; port < first + count; port += 1) handedOut.add(port);
      return first;
    }
  }
  throw new Error(`no ${count} free consecutive ports in ${lowest}-${end - 1}`);
}

/** A TCP port that nothing listens on right now and that this process has not handed out before. */
export async function freePort(): Promise<number> {
  return freePortRange(1);
}
