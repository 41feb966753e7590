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
 * (only if `start` returned). The returned object is empty while the suite is collected and, from
 * the beforeAll on, carries the made thing's properties (getters as getters): tests read it as if it
 * were the thing. For handles that are plain objects (a worker's, an ingress's, a test database).
 */
export function suiteFixture<T extends object>(
  start: () => Promise<T>,
  stop: (made: T) => Promise<void>,
  { timeoutMs }: FixtureOptions = {},
): T {
  const held = {} as T;
  let made: T | undefined;
  beforeAll(async () => {
    made = await start();
    Object.defineProperties(held, Object.getOwnPropertyDescriptors(made));
  }, timeoutMs);
  afterAll(async () => {
    if (made !== undefined) await stop(made);
  });
  return held;
}
