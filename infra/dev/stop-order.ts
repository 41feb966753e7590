// How `npm start` stops what it started: in the one order that lets each part finish its work.
import type { Provided } from './bootstrap.ts';

export interface StopParts {
  /** Stopped together, and each waited for: a worker drains into a live database and broker. */
  services: ReadonlyArray<{ stop(): Promise<void> }>;
  /** Then these, one after the other (Postgres, then the broker); one may still be starting. */
  resources: ReadonlyArray<Promise<Provided<unknown>> | undefined>;
  log: (msg: string) => void;
  error: (err: unknown, msg: string) => void;
}

/**
 * The services, then each resource in turn. A resource still starting is waited for and then
 * stopped; one that failed to start has stopped what it had started already. A stop that fails is
 * reported and the next one still runs.
 */
export async function stopInOrder({ services, resources, log, error }: StopParts): Promise<void> {
  await Promise.all(services.map((s) => s.stop()));
  for (const resource of resources) {
    const provided = await resource?.catch(() => undefined);
    if (!provided) continue;
    if (provided.started) log(`stopping ${provided.started}`);
    try {
      await provided.stop();
      if (provided.started) log(`stopped ${provided.started}`);
    } catch (err) {
      error(err, `could not stop ${provided.started ?? 'a resource'}`);
    }
  }
}
