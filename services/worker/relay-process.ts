import type { Registry } from 'prom-client';
import { ping } from '#domain/store/session.ts';
import { composeWorker, startRelay, type WorkerDeps } from './composition.ts';
import type { WorkerConfig } from './config.ts';
import type { RelayHandle } from './relay/index.ts';
import { OutboxListener } from './relay/notify.ts';
import type { Readiness } from './worker.ts';

export interface RelayProcessHandle {
  registry: Registry;
  relay: RelayHandle;
  /** Whether the LISTEN connection is up (the relay polls RELAY_POLL_MS when it is not). */
  listening: () => boolean;
  /** Notifications heard from apply workers so far. */
  notifications: () => number;
  healthy: () => boolean;
  readiness: () => Promise<Readiness>;
  close: () => Promise<void>;
}

/**
 * WORKER_ROLE=relay: the outbox relay alone, beside workers that run WORKER_ROLE=apply. It takes
 * part in the same leader election as every relay of the bridge, wakes on their commits' NOTIFY
 * and polls besides. On a machine of few cores its work runs beside the apply path instead of
 * queueing behind it on one event loop (docs/operations.md, bench/JOURNAL.md).
 */
export async function startRelayProcess(config: WorkerConfig, deps: WorkerDeps = {}): Promise<RelayProcessHandle> {
  const parts = composeWorker(config, deps);
  const { logger, pool, ownPool, registry, metadataAdmin } = parts;
  let relay: RelayHandle | undefined;
  let listener: OutboxListener | undefined;
  try {
    await metadataAdmin.connect();
    const started = startRelay(config, parts);
    relay = started;
    listener = new OutboxListener({
      databaseUrl: config.databaseUrl,
      logger: logger.child({ component: 'outbox-listen' }),
      onNotify: () => started.nudge(),
    });
    await listener.start();
  } catch (error) {
    await listener?.stop();
    await relay?.stop().catch(() => {});
    await metadataAdmin.disconnect().catch(() => {});
    if (ownPool) await pool.end().catch(() => {});
    throw error;
  }
  const runningRelay = relay;
  const runningListener = listener;
  logger.info({ applied_topic: config.appliedTopic }, 'relay process started');
  let stopping = false;
  let closing: Promise<void> | undefined;
  return {
    registry,
    relay: runningRelay,
    listening: () => runningListener.listening,
    notifications: () => runningListener.heard,
    healthy: () => true,
    readiness: async (): Promise<Readiness> => {
      if (stopping) return { ready: false, checks: { outbox_relay: 'shutting down' } };
      const database = await ping(pool).then(
        () => true,
        (error: unknown) => (error as Error).message,
      );
      return { ready: !stopping && database === true && runningRelay.running, checks: { database, outbox_relay: runningRelay.running } };
    },
    close: () => {
      stopping = true;
      closing ??= (async () => {
        const started = performance.now();
        await runningListener.stop();
        // Publishes what was applied before the stop (bounded: STOP_DRAIN_MS), then stops.
        await runningRelay.stop();
        await metadataAdmin.disconnect().catch(() => {});
        if (ownPool) await pool.end();
        logger.info({ stop_ms: { relay: Math.round(performance.now() - started) } }, 'relay process stopped');
      })();
      return closing;
    },
  };
}
