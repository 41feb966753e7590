// Ports chosen at run time, so two suites on one machine never collide. Only the machine's shared
// broker (9092) and Postgres (5432) keep fixed ports.
import net from 'node:net';

/** A TCP port nothing listens on right now (the OS's pick). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** `count` distinct free ports. */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}
