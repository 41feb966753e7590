import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { createLogger, type Logger } from '#plumbing/logging/logger.ts';

/** Loopback unless told otherwise: metrics and readiness are for the host, not the network. */
export const DEFAULT_ADMIN_HOST = '127.0.0.1';

/**
 * ADMIN_HOST: the address the admin port binds. A container deployment sets 0.0.0.0 so the
 * orchestrator's probes and the metrics scraper (which come from outside the container) reach it.
 */
export const adminHostEnv = z.object({ ADMIN_HOST: z.string().min(1).default(DEFAULT_ADMIN_HOST) });

export interface AdminServerOptions {
  port: number;
  /** Default 127.0.0.1 (ADMIN_HOST in the services' config). */
  host?: string;
  registry: Registry;
  /** Where failing readiness checks are explained (the response never carries the text). */
  logger?: Logger;
  /**
   * Liveness (/livez, /healthz): false only when the process must be restarted (wedged, its
   * consumer dead for good). Never a dependency's state: a broker or database outage is for
   * readiness; a liveness failure makes the orchestrator kill the process, which cures neither.
   */
  healthy?: () => boolean;
  /**
   * Readiness: dependencies answer; a load balancer should send traffic. A check is true when it
   * passes; false or a string (why not: logged, never answered) when it fails.
   */
  ready: () => Promise<{ ready: boolean; checks: Record<string, boolean | string> }>;
  /** Resolves when the registry holds every metric (a scrape waits for it): a service whose metrics
   * are registered as it starts, behind an admin port that answers probes before that. */
  metricsReady?: () => Promise<unknown>;
}

export interface AdminServer {
  port: number;
  close: () => Promise<void>;
}

/**
 * The admin port (metrics, health, readiness), kept apart from any public port. /readyz answers
 * only check names and booleans: error text (broker addresses, database users and hosts) is for
 * the log, not for whoever can reach the port. /livez and /healthz are one endpoint: /livez and
 * /readyz are the names Kubernetes's own components serve, /healthz the older one probes still use.
 */
export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const logger = (options.logger ?? createLogger({ name: 'admin-server' })).child({ component: 'admin-server' });
  // Each failing reason is logged when it first appears (or changes), not on every probe.
  const lastReason = new Map<string, string>();
  const explain = (check: string, reason: string | undefined) => {
    if (reason === undefined) {
      if (lastReason.delete(check)) logger.info({ check }, 'readiness check passing again');
    } else if (lastReason.get(check) !== reason) {
      lastReason.set(check, reason);
      logger.warn({ check, reason }, 'readiness check failing');
    }
  };

  async function readiness(): Promise<{ ready: boolean; checks: Record<string, boolean> }> {
    let result: Awaited<ReturnType<AdminServerOptions['ready']>>;
    try {
      result = await options.ready();
    } catch (error) {
      explain('readiness', (error as Error).message);
      return { ready: false, checks: {} };
    }
    explain('readiness', undefined);
    const checks: Record<string, boolean> = {};
    for (const [name, value] of Object.entries(result.checks)) {
      checks[name] = value === true;
      explain(name, value === true ? undefined : typeof value === 'string' ? value : 'false');
    }
    return { ready: result.ready, checks };
  }

  let closing = false;
  // Once closing, every answer closes its connection: node's server.close() otherwise waits for a
  // kept-alive connection busy at that moment (a scrape) until its keep-alive timeout, 5 s.
  const headers = (contentType: string) =>
    closing ? { 'content-type': contentType, connection: 'close' } : { 'content-type': contentType };
  const server = http.createServer((req, res) => {
    void (async () => {
      try {
        // The path alone: a probe may add a query (`?verbose`) or a trailing slash.
        const path = (req.url ?? '/').split('?', 1)[0]!.replace(/(.)\/$/, '$1');
        if (req.method !== 'GET') {
          res.writeHead(405, closing ? { connection: 'close' } : {}).end();
        } else if (path === '/metrics') {
          await options.metricsReady?.();
          const body = await options.registry.metrics();
          res.writeHead(200, headers(options.registry.contentType)).end(body);
        } else if (path === '/livez' || path === '/healthz') {
          const ok = options.healthy ? options.healthy() : true;
          res.writeHead(ok ? 200 : 503, headers('application/json')).end(JSON.stringify({ ok }));
        } else if (path === '/readyz') {
          const { ready, checks } = await readiness();
          res.writeHead(ready ? 200 : 503, headers('application/json')).end(JSON.stringify({ ready, checks }));
        } else {
          res.writeHead(404, closing ? { connection: 'close' } : {}).end();
        }
      } catch (error) {
        logger.error({ err: error, url: req.url }, 'admin request failed');
        if (!res.headersSent) res.writeHead(500, headers('application/json')).end(JSON.stringify({ error: 'internal_error' }));
      }
    })();
  });
  const host = options.host ?? DEFAULT_ADMIN_HOST;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ host, port }, 'admin server listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
