import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface AdminServerOptions {
  port: number;
  host?: string;
  registry: Registry;
  /** Liveness: the process is not wedged. */
  healthy?: () => boolean;
  /** Readiness: dependencies answer; a load balancer should send traffic. Returns reasons when not ready. */
  ready: () => Promise<{ ready: boolean; checks: Record<string, boolean | string> }>;
}

export interface AdminServer {
  port: number;
  close: () => Promise<void>;
}

/** The admin port (metrics, health, readiness), kept apart from any public port. */
export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const server = http.createServer((req, res) => {
    void (async () => {
      try {
        if (req.method !== 'GET') {
          res.writeHead(405).end();
        } else if (req.url === '/metrics') {
          const body = await options.registry.metrics();
          res.writeHead(200, { 'content-type': options.registry.contentType }).end(body);
        } else if (req.url === '/healthz') {
          const ok = options.healthy ? options.healthy() : true;
          res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ ok }));
        } else if (req.url === '/readyz') {
          const { ready, checks } = await options.ready();
          res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ ready, checks }));
        } else {
          res.writeHead(404).end();
        }
      } catch (error) {
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: (error as Error).message }));
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
