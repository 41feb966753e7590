import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ReconcileSource } from '#domain/sources/index.ts';
import { suiteFixture } from './fixture.ts';

export type ProviderReply = { status: number; body?: unknown } | { hang: number };

/**
 * A real HTTP server standing in for a provider's API: answers GET <path> from a table the test
 * fills, records every request (path and auth header), 404 for what the table lacks.
 */
export interface ProviderApi {
  url: string;
  replies: Map<string, ProviderReply | ((path: string) => ProviderReply)>;
  requests: Array<{ path: string; authorization: string | undefined }>;
  count: (prefix: string) => number;
  close: () => Promise<void>;
}

export async function startProviderApi(): Promise<ProviderApi> {
  const replies: ProviderApi['replies'] = new Map();
  const requests: ProviderApi['requests'] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    requests.push({ path, authorization: req.headers.authorization });
    const entry = replies.get(path) ?? [...replies.entries()].find(([p]) => p.endsWith('*') && path.startsWith(p.slice(0, -1)))?.[1];
    const reply = typeof entry === 'function' ? entry(path) : (entry ?? { status: 404, body: { error: 'not found' } });
    if ('hang' in reply) {
      const timer = setTimeout(() => res.end('{}'), reply.hang);
      res.on('close', () => clearTimeout(timer));
      return;
    }
    res.writeHead(reply.status, { 'content-type': 'application/json' });
    res.end(reply.body === undefined ? '' : JSON.stringify(reply.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    replies,
    requests,
    count: (prefix) => requests.filter((r) => r.path.startsWith(prefix)).length,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A provider API for the suite, listening before its first test, closed after its last. */
export function useProviderApi(): ProviderApi {
  return suiteFixture(startProviderApi, (api) => api.close());
}

/**
 * A source the worker pulls theme snapshots for from `url` (the provider API's): one attempt, limits
 * and a breaker a test's pulls never reach; `over` changes any of them.
 */
export function reconcileSource(
  id: string,
  tenants: string[],
  url: string,
  over: Partial<ReconcileSource['reconcile']> = {},
): ReconcileSource {
  return {
    id,
    tenants,
    resourceTypes: ['theme'],
    reconcile: {
      url,
      timeoutMs: 3000,
      attempts: 1,
      retryDelayMs: 0,
      rateLimit: { perSecond: 100, burst: 100 },
      breaker: { failureThreshold: 50, cooldownMs: 30_000 },
      maxVersionGap: 1,
      ...over,
    },
  };
}
