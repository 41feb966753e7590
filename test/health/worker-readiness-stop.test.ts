import { beforeAll, describe, expect, it } from 'vitest';
import type { PoolClient } from 'pg';
import { useWorker } from '../kit/worker.ts';
import { eventually, sleep } from '../kit/eventually.ts';

// Regression: the worker's readiness answered 503 at once only to a probe that arrived after the
// stop began. A probe already waiting on its database round trip (a loaded Postgres, a busy pool)
// kept waiting for it, so the first probe after SIGTERM could take seconds or time out instead
// of reading 503 (graceful-shutdown.test.ts, under load). The database is made slow to answer
// here by holding every connection of the worker's pool.
describe('worker readiness when the stop begins during a database round trip', () => {
  const POOL_SIZE = 2;
  const { worker } = useWorker({ config: { databasePoolSize: POOL_SIZE }, deps: { onFailure: async () => 'handled' } });

  beforeAll(async () => {
    await eventually(async () => (await worker.readiness()).ready, { timeoutMs: 60_000, message: 'the worker ready' });
  });

  it('answers not ready (shutting down) as soon as close() is called, not after the round trip', async () => {
    const held: PoolClient[] = [];
    try {
      for (let i = 0; i < POOL_SIZE; i += 1) held.push(await worker.pool.connect());
      let answered = false;
      const probe = worker.readiness().finally(() => (answered = true));
      await sleep(300);
      expect(answered, 'the probe waits for the database').toBe(false);

      const stopAt = performance.now();
      const closing = worker.close();
      const answer = await probe;
      const waited = performance.now() - stopAt;
      expect(answer).toEqual({ ready: false, checks: { consumer_group: true, consuming: 'shutting down' } });
      // Half the pool's 5 s connect timeout, which the unchanged code waited out: a liveness bound
      // far above an answer that waits for nothing.
      expect(waited).toBeLessThan(2_500);
      for (const client of held.splice(0)) client.release();
      await closing;
    } finally {
      for (const client of held) client.release();
    }
  }, 60_000);
});
