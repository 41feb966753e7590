// Fixtures: resources that set themselves up and clean up after themselves, as pg-boss's test
// hooks and @platformatic/kafka's test helpers do. A fixture is called while its suite is collected
// (in a describe, or at a file's top level): it registers a beforeAll that makes the resource and
// an afterAll that ends it. So the resource is there before the suite's first test, made within the
// hook timeout and in the order the fixtures are written, and gone after its last test (vitest runs
// afterAll hooks in reverse order: what was made last ends first).
import { afterAll, beforeAll } from 'vitest';

export interface FixtureOptions {
  /** The beforeAll's timeout (default: the project's hookTimeout). */
  timeoutMs?: number;
}

/**
 * Starts what `start` makes before the suite's first test and ends it with `stop` after its last
 * (only if `start` returned). Returns a stand-in for the made thing, for the suite's tests and hooks:
 * reads and calls go to it once it is made, and throw while the suite is being collected (so a
 * fixture is never destructured at collection, when it would silently read undefined).
 */
export function suiteFixture<T extends object>(
  start: () => Promise<T>,
  stop: (made: T) => Promise<void>,
  { timeoutMs }: FixtureOptions = {},
): T {
  let made: T | undefined;
  beforeAll(async () => {
    made = await start();
  }, timeoutMs);
  afterAll(async () => {
    if (made !== undefined) await stop(made);
  });
  const current = (): T => {
    if (made === undefined) throw new Error('a fixture was read before its beforeAll made it (read it in a test or a hook)');
    return made;
  };
  return new Proxy({} as T, {
    get: (_, key) => {
      const value: unknown = Reflect.get(current(), key);
      // Methods run on the made thing itself (a class's private fields are only there).
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(current()) : value;
    },
    set: (_, key, value) => Reflect.set(current(), key, value),
    has: (_, key) => Reflect.has(current(), key),
    ownKeys: () => Reflect.ownKeys(current()),
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(current(), key);
      return descriptor === undefined ? undefined : { ...descriptor, configurable: true };
    },
  });
}
