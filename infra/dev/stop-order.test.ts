import { describe, expect, it } from 'vitest';
import type { Provided } from './bootstrap.ts';
import { stopInOrder } from './stop-order.ts';

/** A part whose stop is recorded in `events` and ends when `release` is called. */
function part(name: string, events: string[]) {
  let release = () => {};
  const stopped = new Promise<void>((resolve) => (release = resolve));
  return {
    release,
    stop: async () => {
      events.push(`stop ${name}`);
      await stopped;
      events.push(`${name} stopped`);
    },
  };
}

function provided(name: string, events: string[], started = true): Provided<unknown> {
  return {
    value: name,
    ...(started ? { started: name } : {}),
    stop: async () => {
      events.push(`stop ${name}`);
    },
  };
}

const quiet = { log: () => {}, error: () => {} };

describe('stopInOrder', () => {
  it('stops Postgres only once every service has exited, and the broker after Postgres', async () => {
    const events: string[] = [];
    const ingress = part('ingress', events);
    const worker = part('worker', events);
    const done = stopInOrder({
      services: [ingress, worker],
      resources: [Promise.resolve(provided('postgres', events)), Promise.resolve(provided('kafka', events))],
      ...quiet,
    });
    ingress.release();
    await Promise.resolve();
    // The worker is still draining: nothing else stops.
    expect(events).toEqual(['stop ingress', 'stop worker', 'ingress stopped']);
    worker.release();
    await done;
    expect(events).toEqual(['stop ingress', 'stop worker', 'ingress stopped', 'worker stopped', 'stop postgres', 'stop kafka']);
  });

  it('waits for a resource still starting, then stops it', async () => {
    const events: string[] = [];
    let finishStart = (_: Provided<unknown>) => {};
    const starting = new Promise<Provided<unknown>>((resolve) => (finishStart = resolve));
    const done = stopInOrder({ services: [], resources: [starting, Promise.resolve(provided('kafka', events))], ...quiet });
    await Promise.resolve();
    expect(events).toEqual([]);
    finishStart(provided('postgres', events));
    await done;
    expect(events).toEqual(['stop postgres', 'stop kafka']);
  });

  it('skips one that failed to start or was never asked for, and goes on after a stop that fails', async () => {
    const events: string[] = [];
    const errors: string[] = [];
    const failing: Provided<unknown> = {
      value: 'postgres',
      started: 'postgres',
      stop: async () => {
        throw new Error('no');
      },
    };
    await stopInOrder({
      services: [],
      resources: [
        Promise.reject(new Error('could not start')),
        undefined,
        Promise.resolve(failing),
        Promise.resolve(provided('kafka', events)),
      ],
      log: (msg) => events.push(msg),
      error: (_err, msg) => errors.push(msg),
    });
    expect(events).toEqual(['stopping postgres', 'stopping kafka', 'stop kafka', 'stopped kafka']);
    expect(errors).toEqual(['could not stop postgres']);
  });

  it('says nothing about one it found running and did not start', async () => {
    const events: string[] = [];
    await stopInOrder({
      services: [],
      resources: [Promise.resolve(provided('postgres', events, false))],
      log: (msg) => events.push(msg),
      error: () => {},
    });
    expect(events).toEqual(['stop postgres']);
  });
});
